import { STATUS_CODES, type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { hostIsOneOf, isSameOrigin, LOCAL_HOSTS, parseHost } from "../facilitator/http/hosts.js";
import { errorResponse } from "./json-rpc.js";

// The JSON-RPC bridge's door (rpc-bridge.ts): web pages are turned away before a request or a WebSocket
// upgrade reaches the chain, as the harness control endpoint and the dashboard turn them away.

/** Texts of the bridge's refusals. */
export const BridgeRefusal = {
  misdirected: "Misdirected Request: the local chain's JSON-RPC endpoint answers only to loopback names and the address it listens on (Host)",
  foreignOrigin: "Forbidden: the local chain's JSON-RPC endpoint takes no requests from another origin's web pages (Origin)",
} as const;

// JSON-RPC 2.0 "Invalid Request", as the bridge's other HTTP refusals (405, 413) answer.
const INVALID_REQUEST = -32600;

/** A refused request: its status and text. */
interface Refusal {
  status: 421 | 403;
  message: string;
}

/** What the bridge checks at the entry of every HTTP request and WebSocket upgrade. */
export interface BridgeGuard {
  /** Answers `req` its refusal and returns true when it is refused: nothing more may be done with it. */
  refusedRequest(req: IncomingMessage, res: ServerResponse): boolean;
  /** Answers a WebSocket upgrade its refusal, closes the socket and returns true when it is refused. */
  refusedUpgrade(req: IncomingMessage, socket: Duplex): boolean;
}

/**
 * The guard of a bridge listening on `host`. A `Host` header that names neither a loopback name nor `host`
 * is answered 421 (DNS rebinding: a page on a name its author controls, resolved to 127.0.0.1, still sends
 * its own name); an `Origin` header that is not the bridge's own origin is answered 403 (browsers send one
 * with every cross-origin POST and every WebSocket opened by a page; a CORS "simple" `text/plain` POST needs
 * no preflight, so without this a page could drive the chain through a developer's browser). Tools (viem,
 * ethers, Hardhat, curl, Node's `fetch` and `ws`) send no `Origin` and go through, and so do browser-extension
 * wallets (MetaMask pointed at the local chain sends `chrome-extension://…`), whose origins no web page can send.
 */
export function bridgeGuard(host: string): BridgeGuard {
  const names = new Set([...LOCAL_HOSTS, ...listenedName(host)]);
  const refusal = (req: IncomingMessage): Refusal | undefined => {
    if (!hostIsOneOf(req.headers.host, names)) return { status: 421, message: BridgeRefusal.misdirected };
    const origin = req.headers.origin;
    if (origin !== undefined && !isSameOrigin(origin, req.headers.host, "http") && !isExtensionOrigin(origin)) return { status: 403, message: BridgeRefusal.foreignOrigin };
    return undefined;
  };
  return {
    refusedRequest(req, res) {
      const refused = refusal(req);
      if (!refused) return false;
      // The body is not read: the connection closes after the answer.
      const text = JSON.stringify(errorResponse(null, INVALID_REQUEST, refused.message));
      res.writeHead(refused.status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), Connection: "close" }).end(text);
      return true;
    },
    refusedUpgrade(req, socket) {
      const refused = refusal(req);
      if (!refused) return false;
      const text = JSON.stringify(errorResponse(null, INVALID_REQUEST, refused.message));
      socket.on("error", () => {});
      socket.once("finish", () => socket.destroy());
      socket.end(
        `HTTP/1.1 ${refused.status} ${STATUS_CODES[refused.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
      return true;
    },
  };
}

/** Origin schemes only a browser extension's own pages and workers send (Chromium, Firefox, Safari). */
const EXTENSION_ORIGIN = /^(chrome-extension|moz-extension|safari-web-extension):\/\/[a-z0-9.-]+$/i;

/** Whether `origin` is a browser extension's (a wallet's): a web page's fetch or WebSocket can never send one. */
function isExtensionOrigin(origin: string): boolean {
  return EXTENSION_ORIGIN.test(origin);
}

/** The name clients use for the address the bridge listens on, unless it is every address (`0.0.0.0`, `::`). */
function listenedName(host: string): string[] {
  const parsed = parseHost(host.includes(":") && !host.startsWith("[") ? `[${host}]` : host);
  return parsed && parsed.name !== "0.0.0.0" && parsed.name !== "[::]" ? [parsed.name] : [];
}
