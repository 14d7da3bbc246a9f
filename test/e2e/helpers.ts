import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { createServer, type IncomingMessage, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect } from "chai";
import express from "express";
import {
  createPublicClient,
  createWalletClient,
  http,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { cronos, cronosTestnet } from "viem/chains";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { createChainReader } from "../../src/conformance/chain.js";
import { expectSettlementOnChain as checkSettlementOnChain, type SettlementOnChain } from "../../src/conformance/settlement.js";
import { localAccount } from "../../src/harness/accounts.js";
import { startLocalStack, type LocalStack, type LocalStackOptions } from "../../src/harness/stack.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import type { PaymentRequirements } from "../../src/protocol/schemas.js";
import { paymentRequirements, requirePayment, type RequirePaymentOptions } from "../../src/seller/index.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** The kit's root directory. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** One stack per e2e file: every port ephemeral, rate limits off. */
export const STACK_OPTIONS = {
  port: 0,
  rpcPorts: { "cronos-testnet": 0, "cronos-mainnet": 0 },
  rateLimits: { verifyPerMinute: 0, settlePerMinute: 0 },
} as const satisfies LocalStackOptions;

/** Price of every paid route of the test seller: 0.01 USDC.e. */
export const PRICE = 10_000n;

export const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
export const TX_HASH = /^0x[0-9a-f]{64}$/;

const VIEM_CHAIN: Record<NetworkName, Chain> = { "cronos-testnet": cronosTestnet, "cronos-mainnet": cronos };

// ---------------------------------------------------------------------------------------------
// HTTP servers on loopback

/** A server listening on an ephemeral 127.0.0.1 port. */
export interface Listening {
  url: string;
  port: number;
  server: Server;
  /** Closes the server and every open connection. */
  close(): Promise<void>;
}

/** Serves `handler` (an Express app or a plain listener) on an ephemeral loopback port. */
export async function listen(handler: RequestListener): Promise<Listening> {
  const server = createServer(handler);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    server,
    close() {
      closing ??= (async () => {
        const closed = once(server, "close");
        server.close();
        server.closeAllConnections();
        await closed;
      })();
      return closing;
    },
  };
}

/** A loopback URL where nothing listens (a port that was bound, then released). */
export async function closedPortUrl(): Promise<string> {
  const server = await listen((_req, res) => res.end());
  await server.close();
  return server.url;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** A call the proxy passed on to the facilitator. */
export interface ProxiedCall {
  path: string;
  body: unknown;
  status: number;
  answer: unknown;
}

/** An answer the proxy gives instead of the facilitator's (what a wrong facilitator would say). */
export interface ProxiedAnswer {
  status: number;
  contentType: string;
  body: string;
}

// Hop-by-hop and length headers: the proxy's own connection sets these.
const UNFORWARDED = new Set(["host", "connection", "content-length", "transfer-encoding", "keep-alive"]);

/**
 * A transparent proxy in front of the real facilitator, so a test can see which calls the seller
 * made, and act on the chain between verify and settle (what another party could do in that gap).
 */
export interface FacilitatorProxy extends Listening {
  calls: ProxiedCall[];
  /** Runs once before the next settle is passed on (then cleared). */
  beforeSettle?: (body: unknown) => Promise<void>;
  /** Answers instead of the facilitator when it returns an answer (the call is still made and recorded). */
  rewrite?: (call: ProxiedCall) => ProxiedAnswer | undefined;
  /** The paths called since the last reset. */
  paths(): string[];
  reset(): void;
}

export async function startFacilitatorProxy(target: string): Promise<FacilitatorProxy> {
  const calls: ProxiedCall[] = [];
  const proxy = {} as FacilitatorProxy;
  const listening = await listen((req, res) => {
    void (async () => {
      const text = await readBody(req);
      const path = req.url ?? "/";
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      if (path.endsWith("/settle") && proxy.beforeSettle) {
        const hook = proxy.beforeSettle;
        proxy.beforeSettle = undefined;
        await hook(body);
      }
      const headers = Object.entries(req.headers).filter(([name]) => !UNFORWARDED.has(name)) as Array<[string, string]>;
      if (req.headers["content-type"] === undefined) headers.push(["content-type", "application/json"]);
      const upstream = await fetch(`${target}${path}`, {
        method: req.method,
        headers,
        ...(req.method === "GET" || req.method === "HEAD" ? {} : { body: text }),
      });
      const answerText = await upstream.text();
      let answer: unknown;
      try {
        answer = JSON.parse(answerText);
      } catch {
        answer = answerText;
      }
      const call = { path, body, status: upstream.status, answer };
      calls.push(call);
      const rewritten = proxy.rewrite?.(call);
      if (rewritten) {
        res.writeHead(rewritten.status, { "content-type": rewritten.contentType });
        res.end(rewritten.body);
        return;
      }
      const answerHeaders = [...upstream.headers].filter(([name]) => !UNFORWARDED.has(name) && name !== "content-encoding");
      res.writeHead(upstream.status, Object.fromEntries(answerHeaders));
      res.end(answerText);
    })().catch((error: unknown) => {
      res.writeHead(599, { "content-type": "text/plain" });
      res.end(`proxy failure: ${String(error)}`);
    });
  });
  return Object.assign(proxy, listening, {
    calls,
    paths: () => calls.map((call) => call.path),
    reset() {
      calls.length = 0;
      proxy.beforeSettle = undefined;
      proxy.rewrite = undefined;
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The test seller

/** What each paid route of the test seller answers once paid (before `payment` is merged in). */
export function content(route: string): { report: string; route: string } {
  return { report: "sunny, 21 °C", route };
}

/** A seller: an Express app with `requirePayment` routes, on an ephemeral loopback port. */
export interface TestSeller extends Listening {
  /** The requirements of each route, as the seller answers them in its 402. */
  requirements: {
    testnet: PaymentRequirements;
    mainnet: PaymentRequirements;
    /** Mainnet under the docs' alias `cronos`. */
    cronos: PaymentRequirements;
  };
  /** Paths: GET testnet, mainnet, alias; POST (header in the JSON body) on testnet. */
  routes: { testnet: string; mainnet: string; cronos: string; testnetPost: string };
}

/**
 * Starts a seller paying `payTo` {@link PRICE} on each network. The facilitator is reached at
 * `facilitatorUrl`; `options` go to every `requirePayment`.
 */
export async function startSeller(
  facilitatorUrl: string,
  payTo: Address,
  options: Omit<RequirePaymentOptions, "facilitatorUrl" | "facilitator"> = {},
): Promise<TestSeller> {
  const requirements = {
    testnet: paymentRequirements({ network: "cronos-testnet", payTo, amount: PRICE, resource: "/testnet/report" }),
    mainnet: paymentRequirements({ network: "cronos-mainnet", payTo, amount: PRICE, resource: "/mainnet/report" }),
    cronos: paymentRequirements({ network: "cronos", payTo, amount: PRICE, resource: "/cronos/report" }),
  };
  const routes = { testnet: "/testnet/report", mainnet: "/mainnet/report", cronos: "/cronos/report", testnetPost: "/testnet/report" };
  const app = express();
  const paid = (which: keyof typeof requirements) => requirePayment(requirements[which], { facilitatorUrl, timeoutMs: 20_000, ...options });
  app.get(routes.testnet, paid("testnet"), (_req, res) => void res.json(content(routes.testnet)));
  app.post(routes.testnetPost, paid("testnet"), (_req, res) => void res.json(content(`POST ${routes.testnetPost}`)));
  app.get(routes.mainnet, paid("mainnet"), (_req, res) => void res.json(content(routes.mainnet)));
  app.get(routes.cronos, paid("cronos"), (_req, res) => void res.json(content(routes.cronos)));
  const listening = await listen(app);
  return Object.assign(listening, { requirements, routes });
}

/** The seller's 402 body: `{error, x402Version, paymentRequirements, accepts, reason?}`. */
export function paymentRequiredBody(requirements: PaymentRequirements, error: string, reason?: string) {
  return {
    error,
    x402Version: 1,
    paymentRequirements: requirements,
    accepts: [requirements],
    ...(reason === undefined ? {} : { reason }),
  };
}

/** Asserts an answer's status and its exact JSON body. */
export async function expectAnswer(response: Response, status: number, body: unknown): Promise<void> {
  const text = await response.text();
  expect(response.status, text).to.equal(status);
  expect(JSON.parse(text)).to.deep.equal(body);
}

/** A `fetch` that records the `X-PAYMENT` header of each request it sends. */
export function recordingFetch(): { fetch: typeof fetch; paymentHeaders: string[] } {
  const paymentHeaders: string[] = [];
  const recording: typeof fetch = async (input, init) => {
    const header = new Headers(init?.headers).get("X-PAYMENT");
    if (header !== null) paymentHeaders.push(header);
    return fetch(input, init);
  };
  return { fetch: recording, paymentHeaders };
}

/** The JSON object inside a base64 payment header. */
export function decodeBase64Json(value: string): Record<string, any> {
  return JSON.parse(Buffer.from(value, "base64").toString("utf8")) as Record<string, any>;
}

export function encodeBase64Json(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}

// ---------------------------------------------------------------------------------------------
// The chain, over its JSON-RPC URL (as any other process would reach it)

const clients = new Map<string, PublicClient>();

/** A viem client over HTTP JSON-RPC. */
export function rpcClient(rpcUrl: string): PublicClient {
  let client = clients.get(rpcUrl);
  if (!client) {
    client = createPublicClient({ transport: http(rpcUrl), pollingInterval: 20, cacheTime: 0 }) as PublicClient;
    clients.set(rpcUrl, client);
  }
  return client;
}

/** USDC.e balance of `account`, read over `rpcUrl`. */
export function tokenBalance(rpcUrl: string, token: Address, account: Address): Promise<bigint> {
  return rpcClient(rpcUrl).readContract({ address: token, abi: tokenAbi, functionName: "balanceOf", args: [account] });
}

/** USDC.e balances of several accounts. */
export function tokenBalances(rpcUrl: string, token: Address, accounts: readonly Address[]): Promise<bigint[]> {
  return Promise.all(accounts.map((account) => tokenBalance(rpcUrl, token, account)));
}

/** The latest block's timestamp (the chain's clock, which verify and the token use). */
export async function chainTime(rpcUrl: string): Promise<bigint> {
  return (await rpcClient(rpcUrl).getBlock({ blockTag: "latest" })).timestamp;
}

/** Calls one JSON-RPC method with plain `fetch`; throws on a JSON-RPC error. */
export async function rawRpc<T = unknown>(rpcUrl: string, method: string, params: unknown[] = []): Promise<T> {
  const response = await fetch(rpcUrl, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const json = (await response.json()) as { result?: T; error?: { message: string } };
  if (json.error) throw new Error(`${method}: ${json.error.message}`);
  return json.result as T;
}

/** Moves the chain's clock forward by `seconds` and mines a block at the new time. */
export async function increaseTime(rpcUrl: string, seconds: number): Promise<void> {
  await rawRpc(rpcUrl, "evm_increaseTime", [seconds]);
  await rawRpc(rpcUrl, "evm_mine", []);
}

/** ABI-encoded `balanceOf(address)` call data. */
export function balanceOfData(address: string): Hex {
  return `0x70a08231${address.slice(2).toLowerCase().padStart(64, "0")}`;
}

type WriteFunction = "pause" | "unpause" | "blacklist" | "unBlacklist" | "transfer" | "cancelAuthorization";

/**
 * Sends a token transaction signed by `privateKey` over `rpcUrl` and waits for it to be mined.
 * The owner (pauser, blacklister) is Hardhat account #0: {@link ownerKey}.
 */
export async function writeToken(
  network: NetworkName,
  rpcUrl: string,
  token: Address,
  privateKey: Hex,
  functionName: WriteFunction,
  args: readonly unknown[] = [],
): Promise<TransactionReceipt> {
  const wallet = createWalletClient({ account: privateKeyToAccount(privateKey), chain: VIEM_CHAIN[network], transport: http(rpcUrl) });
  const hash = await wallet.writeContract({ address: token, abi: tokenAbi, functionName, args } as never);
  const receipt = await rpcClient(rpcUrl).waitForTransactionReceipt({ hash, pollingInterval: 20 });
  expect(receipt.status, `${functionName} mined`).to.equal("success");
  return receipt;
}

/** Hardhat account #0's key: deployer and owner (pauser, blacklister) of the local tokens. A PUBLIC key, LOCAL-ONLY. */
export function ownerKey(): Hex {
  return localAccount(0).privateKey;
}

/** The token events of a settlement receipt, decoded (the conformance catalog's reading). */
export { tokenEvents } from "../../src/conformance/chain.js";

/**
 * Checks a settlement on chain with the conformance catalog's own check: the receipt succeeded, was sent
 * by the relayer to the token, and holds exactly AuthorizationUsed(from, nonce) then Transfer(from, to,
 * value); balances moved by it. Returns the receipt and its block's ISO timestamp.
 */
export function expectSettlementOnChain(
  stack: LocalStack,
  network: NetworkName,
  txHash: Hex,
  expected: { from: Address; to: Address; value: bigint; nonce: Hex },
): Promise<SettlementOnChain> {
  const info = stack.networks[network]!;
  return checkSettlementOnChain(createChainReader(info.rpcUrl), { token: info.token, txHash, ...expected, relayers: [stack.relayer] });
}

// ---------------------------------------------------------------------------------------------
// Child processes

/** A spawned process with its output collected. */
export interface Spawned {
  child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stdout (rejects on exit or after `timeoutMs`). */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  /** The exit code, or the signal name. */
  exited: Promise<number | NodeJS.Signals>;
  /** SIGKILL to the process group it leads, if anything of it still runs (for `after` / `finally`). */
  kill(): void;
}

/**
 * Spawns `command args` in the kit's root with node_modules/.bin first on PATH (so `node` and `tsx`
 * are the Node 22 ones), `env` added to the current environment.
 */
export function spawnInRoot(command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Spawned {
  const bin = join(ROOT, "node_modules", ".bin");
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` },
    stdio: ["pipe", "pipe", "pipe"],
    // Its own process group: `kill` reaches what it starts in turn (tsx runs the script in a child).
    detached: true,
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
  let done = false;
  const exited = new Promise<number | NodeJS.Signals>((resolve) =>
    child.once("exit", (code, signal) => {
      done = true;
      resolve(code ?? signal ?? -1);
    }),
  );
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    kill() {
      // The whole group, even when the direct child is gone: a grandchild would keep the pipes open.
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // ESRCH: nothing left in the group
      }
    },
    waitFor(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => finish(new Error(`no ${pattern} on stdout within ${timeoutMs} ms\nstdout:\n${out}\nstderr:\n${err}`)), timeoutMs);
        const onData = () => {
          const match = out.match(pattern);
          if (match) finish(undefined, match);
        };
        const onExit = () => {
          onData();
          finish(new Error(`exited before printing ${pattern}\nstdout:\n${out}\nstderr:\n${err}`));
        };
        let finished = false;
        function finish(error?: Error, match?: RegExpMatchArray) {
          if (finished) return;
          finished = true;
          clearTimeout(timer);
          child.stdout.off("data", onData);
          child.off("exit", onExit);
          if (error) reject(error);
          else resolve(match!);
        }
        child.stdout.on("data", onData);
        child.once("exit", onExit);
        onData();
        if (done) onExit();
      });
    },
  };
}

/** What most e2e files run against: a local stack, a recording proxy in front of its facilitator, and a seller. */
export interface SellerEnvironment {
  stack: LocalStack;
  proxy: FacilitatorProxy;
  seller: TestSeller;
}

/**
 * Registers mocha hooks (call it inside a `describe`) that start a {@link SellerEnvironment} before the
 * tests, stop it after them, and clear the proxy's records before each test. The returned object is
 * filled in once the `before` hook has run.
 */
export function useSellerEnvironment(): SellerEnvironment {
  const env = {} as SellerEnvironment;
  before(async () => {
    env.stack = await startLocalStack(STACK_OPTIONS);
    env.proxy = await startFacilitatorProxy(env.stack.facilitatorUrl);
    env.seller = await startSeller(env.proxy.url, env.stack.seller);
  });
  after(async () => {
    await env.seller?.close();
    await env.proxy?.close();
    await env.stack?.stop();
  });
  beforeEach(() => env.proxy.reset());
  return env;
}
