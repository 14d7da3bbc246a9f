import type { RequestHandler } from "express";
import { RequestError } from "../../protocol/reasons.js";

/** The names the local stack always answers to, on any port: loopback only. */
export const LOCAL_HOSTS: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

// Characters that would make `http://<host>` mean something else (a path, credentials, a fragment).
const NOT_IN_A_HOST = /[\s/\\?#@]/;

/**
 * The host of a `Host` header or an `ALLOWED_HOSTS` entry as a URL parser reads it (lower case, an IPv6
 * literal in brackets and compressed, an IPv4 in dotted decimal, one trailing dot dropped) and its port
 * (`""` when none or the default); `undefined` when it is not a host.
 */
export function parseHost(value: string | undefined): { name: string; port: string } | undefined {
  if (value === undefined || value === "" || NOT_IN_A_HOST.test(value)) return undefined;
  let url: URL;
  try {
    url = new URL(`http://${value}`);
  } catch {
    return undefined;
  }
  if (url.hostname === "") return undefined;
  return { name: url.hostname.endsWith(".") ? url.hostname.slice(0, -1) : url.hostname, port: url.port };
}

/**
 * Whether a `Host` header (read as sent: never `X-Forwarded-Host`) names one of `names` (as {@link parseHost}
 * gives them; any port). What defeats DNS rebinding: a page on a name its author controls, resolved to this
 * service's address, still sends its own name.
 */
export function hostIsOneOf(host: string | undefined, names: ReadonlySet<string>): boolean {
  const parsed = parseHost(host);
  return parsed !== undefined && names.has(parsed.name);
}

/**
 * Whether an `Origin` header is the origin (scheme, host and port) the request was sent to: `protocol`
 * (`http` or `https`) and its `Host`. A missing `Origin`, `null` (a sandboxed page, a file) and anything that
 * is not an origin are not.
 */
export function isSameOrigin(origin: string | undefined, host: string | undefined, protocol: string): boolean {
  if (origin === undefined || parseHost(host) === undefined) return false;
  try {
    return new URL(origin).origin === new URL(`${protocol}://${host}`).origin;
  } catch {
    return false;
  }
}

/**
 * Express middleware that answers 421 JSON, before anything else runs, to a request whose `Host` header
 * names none of `allowed` ({@link hostIsOneOf}).
 */
export function requireHost(allowed: Iterable<string>): RequestHandler {
  const names = new Set(allowed);
  return (req, res, next) => {
    if (hostIsOneOf(req.headers.host, names)) return next();
    res.status(421).json({ error: RequestError.misdirected });
  };
}

/**
 * Express middleware that answers 403 JSON to a request whose `Origin` is missing or is not this service's
 * own origin (scheme, host and port of the request): a state-changing call a page elsewhere cannot make
 * through a visitor's browser. Browsers send `Origin` with every POST from a page.
 */
export function requireSameOrigin(): RequestHandler {
  return (req, res, next) => {
    if (isSameOrigin(req.headers.origin, req.headers.host, req.protocol)) return next();
    res.status(403).json({ error: RequestError.foreignOrigin });
  };
}
