import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { numberToHex, type Hex } from "viem";
import { lagRequest, lagResult } from "./lagging-node.js";
import { closeAfter } from "./teardown.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/**
 * What a rule does to a request it matches:
 * - `reset`: destroys the connection before forwarding (the request never reaches the node);
 * - `http503`: answers HTTP 503 without forwarding;
 * - `hang`: never answers, without forwarding (until the proxy is killed or closed);
 * - `swallow`: forwards the request, then destroys the connection instead of answering (the node
 *   acted on it; the caller never learns how);
 * - `rpcError`: answers the matching calls with a JSON-RPC error ({@link FaultRule.error}) without forwarding
 *   them (the node never sees them); the other calls of a batch are forwarded and answered as usual.
 */
export type FaultKind = "reset" | "http503" | "hang" | "swallow" | "rpcError";

/** A JSON-RPC error object as a node answers it. */
export interface JsonRpcError {
  code: number;
  message: string;
  data?: unknown;
}

/** A fault the proxy applies to the requests it matches. */
export interface FaultRule {
  kind: FaultKind;
  /** Only HTTP requests carrying this JSON-RPC method (alone or in a batch); default every request. */
  method?: string;
  /** How many requests it applies to; default every one until {@link FaultProxy.clear}. */
  times?: number;
  /** Runs each time the rule applied (after forwarding, for `swallow`), before the connection is cut; gets the JSON-RPC requests. */
  then?: (requests: JsonRpcRequest[]) => Promise<void> | void;
  /**
   * For `rpcError`: the error to answer a call with, or a function of the call (it may read the chain) that
   * gives it, or undefined to let that call through (then the rule does not apply, and uses none of its `times`).
   */
  error?: JsonRpcError | ((request: JsonRpcRequest) => Promise<JsonRpcError | undefined> | JsonRpcError | undefined);
}

/** Calls straight to the chain behind the proxy (never through its faults). */
export interface ChainControls {
  /** Calls one JSON-RPC method; throws the node's error message. */
  call<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  /** `hardhat_dropTransaction`: removes a pending transaction from the node's pool; true when it was there. */
  dropTransaction(hash: Hex): Promise<boolean>;
  /** `hardhat_setNextBlockBaseFeePerGas`: the base fee of the next block (later blocks follow EIP-1559 from it). */
  setNextBlockBaseFee(wei: bigint): Promise<void>;
  /** `evm_setIntervalMining`: a block every `ms` (0: off). */
  intervalMining(ms: number): Promise<void>;
  /** `evm_setAutomine`: each transaction mined at once (on), or left in the pool (off). */
  automine(on: boolean): Promise<void>;
  /** `evm_mine`, `blocks` times. */
  mine(blocks?: number): Promise<void>;
  /** Hashes of the transactions in the node's pool. */
  pending(): Promise<Hex[]>;
}

/**
 * A JSON-RPC proxy between the facilitator and a chain, controlled by the test: it forwards every
 * HTTP request to `upstream` unless a fault rule matches, counts each JSON-RPC method it sees, can
 * delay every request, refuse connections ({@link kill}), and hide transactions from receipt reads.
 */
export interface FaultProxy {
  url: string;
  port: number;
  /** The JSON-RPC methods seen (each item of a batch), in arrival order, faulted or not. */
  methods: string[];
  /** The same, one entry per HTTP request (a round trip): a batch's methods in its order. */
  batches: string[][];
  /** The signed transactions given to `eth_sendRawTransaction`, in arrival order (repeats included): what went out through this proxy. */
  broadcasts: Hex[];
  count(method: string): number;
  /** Every request waits this long before anything else (a slow node). */
  delayMs: number;
  /** The height it answers at, while {@link behind}. */
  lagHeight: bigint | undefined;
  /** Adds a rule; the first matching rule that has uses left applies. */
  fail(rule: FaultRule): void;
  /** How many times the rules applied so far. */
  faulted: number;
  /**
   * Answers `null` to `eth_getTransactionReceipt` and `eth_getTransactionByHash` of `hash` (as a node
   * that has not seen it) until {@link unhide}.
   */
  hide(hash: Hex): void;
  unhide(hash: Hex): void;
  /**
   * Rewrites answers until {@link clear}: each item of a forwarded request (alone or in a batch) is offered to
   * `rewriter` with the node's answer to it; what it returns replaces that answer (undefined keeps it).
   */
  rewrite(rewriter: Rewriter): void;
  /**
   * Rewrites answers until {@link clear}, one HTTP request at a time: `rewriter` gets the request's JSON-RPC
   * requests and the node's answers to them (in the same order), and what it returns replaces those answers
   * (undefined keeps them). Runs after the per-item {@link rewrite}rs.
   */
  rewriteBatch(rewriter: BatchRewriter): void;
  /**
   * Answers as a node behind, at block `height` (its head, blocks, receipts, logs and state of that height: see
   * lagging-node.ts), until called with undefined or {@link clear}.
   */
  behind(height: bigint | undefined): void;
  /** Stops listening and cuts every open connection: new ones are refused until {@link revive}. */
  kill(): Promise<void>;
  /** Listens again on the same port. */
  revive(): Promise<void>;
  /** Drops every rule, the delay and the hidden hashes. */
  clear(): void;
  /** The chain behind the proxy. */
  chain: ChainControls;
  close(): Promise<void>;
}

interface ActiveRule extends FaultRule {
  left: number;
}

/** The part of a JSON-RPC answer a {@link Rewriter} sees and gives. */
export interface JsonRpcAnswer {
  result?: unknown;
  error?: { code: number; message: string };
}

/** Changes the node's answer to one request; undefined keeps it. */
export type Rewriter = (request: JsonRpcRequest, answer: JsonRpcAnswer) => JsonRpcAnswer | undefined;

/** Changes the node's answers to one HTTP request (`answers[i]` answers `requests[i]`); undefined keeps them. */
export type BatchRewriter = (requests: JsonRpcRequest[], answers: JsonRpcAnswer[], chain: ChainControls) => Promise<JsonRpcAnswer[] | undefined> | JsonRpcAnswer[] | undefined;

/** One JSON-RPC request as the proxy saw it. */
export interface JsonRpcRequest {
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

type JsonRpcItem = JsonRpcRequest;

/** Starts a fault-injection proxy on 127.0.0.1 (a free port) in front of the JSON-RPC endpoint `upstream`. */
export async function startFaultProxy(upstream: string): Promise<FaultProxy> {
  const rules: ActiveRule[] = [];
  const hidden = new Set<string>();
  const rewriters: Rewriter[] = [];
  const batchRewriters: BatchRewriter[] = [];
  const sockets = new Set<Socket>();
  const parked = new Set<ServerResponse>();
  const methods: string[] = [];
  const batches: string[][] = [];
  const broadcasts: Hex[] = [];

  const forward = async (body: string): Promise<{ status: number; text: string }> => {
    const answer = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body });
    return { status: answer.status, text: await answer.text() };
  };

  /**
   * The `rpcError` rules: each call a rule answers gets its error (the first rule with uses left whose `error`
   * gives one); the others are forwarded (a batch in one request). True when it answered the request.
   */
  const answerErrors = async (items: JsonRpcItem[], parsed: JsonRpcItem | JsonRpcItem[] | undefined, res: ServerResponse): Promise<boolean> => {
    const errorRules = rules.filter((r) => r.kind === "rpcError" && r.left > 0);
    if (errorRules.length === 0 || parsed === undefined) return false;
    const answered = new Map<JsonRpcItem, JsonRpcError>();
    for (const item of items) {
      for (const rule of errorRules) {
        if (rule.left <= 0 || (rule.method !== undefined && item.method !== rule.method)) continue;
        const error = typeof rule.error === "function" ? await rule.error(item) : rule.error;
        if (!error) continue;
        rule.left--;
        proxy.faulted++;
        await rule.then?.([item]);
        answered.set(item, error);
        break;
      }
    }
    if (answered.size === 0) return false;
    const rest = items.filter((item) => !answered.has(item));
    const forwarded = rest.length === 0 ? [] : ((JSON.parse((await forward(JSON.stringify(rest))).text) as unknown[]) ?? []);
    const replies = items.map((item) => {
      const error = answered.get(item);
      if (error) return { jsonrpc: "2.0", id: item.id, error };
      return (forwarded as Array<{ id?: unknown }>).find((reply) => reply.id === item.id);
    });
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(Array.isArray(parsed) ? replies : replies[0]));
    return true;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    let parsed: JsonRpcItem | JsonRpcItem[] | undefined;
    try {
      parsed = JSON.parse(body) as JsonRpcItem | JsonRpcItem[];
    } catch {
      parsed = undefined;
    }
    const items = parsed === undefined ? [] : Array.isArray(parsed) ? parsed : [parsed];
    const called = items.map((item) => String(item.method));
    methods.push(...called);
    batches.push(called);
    for (const item of items) if (item.method === "eth_sendRawTransaction") broadcasts.push((item.params as [Hex])[0]);
    // The fault itself (a slow node), not a wait of the test's.
    if (proxy.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, proxy.delayMs));

    if (await answerErrors(items, parsed, res)) return;
    const rule = rules.find((r) => r.kind !== "rpcError" && r.left > 0 && (r.method === undefined || called.includes(r.method)));
    if (rule) {
      rule.left--;
      proxy.faulted++;
      if (rule.kind === "swallow") await forward(body);
      await rule.then?.(items);
      if (rule.kind === "reset" || rule.kind === "swallow") req.socket.destroy();
      else if (rule.kind === "http503") res.writeHead(503, { "content-type": "text/plain" }).end("Service Unavailable");
      else parked.add(res);
      return;
    }

    const lag = proxy.lagHeight;
    const answer = await forward(lag === undefined || parsed === undefined ? body : JSON.stringify(Array.isArray(parsed) ? items.map((i) => lagRequest(i, lag)) : lagRequest(items[0]!, lag)));
    let text = answer.text;
    if (lag !== undefined && answer.status === 200) text = JSON.stringify(rewritten(JSON.parse(text) as unknown, items, [(item, a) => ("result" in a ? { result: lagResult(item, a.result, lag) } : undefined)]));
    if (hidden.size > 0 && answer.status === 200) text = JSON.stringify(hide(JSON.parse(text) as unknown, items, hidden));
    if (rewriters.length > 0 && answer.status === 200) text = JSON.stringify(rewritten(JSON.parse(text) as unknown, items, rewriters));
    if (batchRewriters.length > 0 && answer.status === 200) text = JSON.stringify(await batchRewritten(JSON.parse(text) as unknown, items, batchRewriters, proxy.chain));
    res.writeHead(answer.status, { "content-type": "application/json" }).end(text);
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  let listening = true;

  const stop = async () => {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    parked.clear();
    await closed;
  };

  const call = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const { text } = await forward(JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }));
    const answer = JSON.parse(text) as { result?: T; error?: { message: string } };
    if (answer.error) throw new Error(`${method}: ${answer.error.message}`);
    return answer.result as T;
  };

  const proxy: FaultProxy = {
    url: `http://127.0.0.1:${port}`,
    port,
    methods,
    batches,
    broadcasts,
    count: (method) => methods.filter((m) => m === method).length,
    delayMs: 0,
    faulted: 0,
    fail(rule) {
      rules.push({ ...rule, left: rule.times ?? Infinity });
    },
    hide(hash) {
      hidden.add(hash.toLowerCase());
    },
    unhide(hash) {
      hidden.delete(hash.toLowerCase());
    },
    rewrite(rewriter) {
      rewriters.push(rewriter);
    },
    rewriteBatch(rewriter) {
      batchRewriters.push(rewriter);
    },
    lagHeight: undefined,
    behind(height) {
      proxy.lagHeight = height;
    },
    kill: stop,
    async revive() {
      if (listening) return;
      await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
      listening = true;
    },
    clear() {
      rules.length = 0;
      hidden.clear();
      rewriters.length = 0;
      batchRewriters.length = 0;
      proxy.lagHeight = undefined;
      proxy.delayMs = 0;
      for (const res of parked) res.destroy();
      parked.clear();
    },
    chain: {
      call,
      dropTransaction: (hash) => call<boolean>("hardhat_dropTransaction", [hash]),
      async setNextBlockBaseFee(wei) {
        await call("hardhat_setNextBlockBaseFeePerGas", [numberToHex(wei)]);
      },
      async intervalMining(ms) {
        await call("evm_setIntervalMining", [ms]);
      },
      async automine(on) {
        await call("evm_setAutomine", [on]);
      },
      async mine(blocks = 1) {
        for (let i = 0; i < blocks; i++) await call("evm_mine");
      },
      async pending() {
        const block = await call<{ transactions: Hex[] }>("eth_getBlockByNumber", ["pending", false]);
        return block.transactions;
      },
    },
    close: async () => {
      proxy.clear();
      await stop();
    },
  };
  closeAfter(`RPC fault proxy on port ${port}`, () => proxy.close());
  return proxy;
}

/** The answer with `null` for every receipt or transaction read of a hidden hash. */
function hide(answer: unknown, items: JsonRpcItem[], hidden: ReadonlySet<string>): unknown {
  const isHidden = (item: JsonRpcItem | undefined) =>
    item !== undefined &&
    (item.method === "eth_getTransactionReceipt" || item.method === "eth_getTransactionByHash") &&
    Array.isArray(item.params) &&
    hidden.has(String(item.params[0]).toLowerCase());
  const rewrite = (response: { id?: unknown; result?: unknown }) => {
    const item = items.find((i) => i.id === response.id);
    return isHidden(item) ? { jsonrpc: "2.0", id: response.id, result: null } : response;
  };
  return Array.isArray(answer) ? answer.map(rewrite) : rewrite(answer as { id?: unknown });
}

/** The answer with each item passed through the rewriters, in order. */
function rewritten(answer: unknown, items: JsonRpcItem[], rewriters: readonly Rewriter[]): unknown {
  const one = (response: { jsonrpc?: string; id?: unknown } & JsonRpcAnswer) => {
    const item = items.find((i) => i.id === response.id);
    if (!item) return response;
    let current: JsonRpcAnswer = "error" in response ? { error: response.error! } : { result: response.result };
    for (const rewriter of rewriters) current = rewriter(item, current) ?? current;
    return { jsonrpc: "2.0", id: response.id, ...current };
  };
  return Array.isArray(answer) ? answer.map(one) : one(answer as { id?: unknown });
}

/** The answer with the request's items passed to each batch rewriter, in order (a single answer stays single). */
async function batchRewritten(answer: unknown, items: JsonRpcItem[], rewriters: readonly BatchRewriter[], chain: ChainControls): Promise<unknown> {
  const responses = (Array.isArray(answer) ? answer : [answer]) as Array<{ id?: unknown } & JsonRpcAnswer>;
  const paired = items.map((item) => ({ item, response: responses.find((r) => r.id === item.id) }));
  const known = paired.filter((p): p is { item: JsonRpcItem; response: { id?: unknown } & JsonRpcAnswer } => p.response !== undefined);
  let current: JsonRpcAnswer[] = known.map(({ response }) => ("error" in response ? { error: response.error! } : { result: response.result }));
  for (const rewriter of rewriters) current = (await rewriter(known.map((p) => p.item), current, chain)) ?? current;
  const out = known.map(({ response }, i) => ({ jsonrpc: "2.0", id: response.id, ...current[i] }));
  return Array.isArray(answer) ? out : out[0];
}
