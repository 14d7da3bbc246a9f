import { once } from "node:events";
import { expect } from "chai";
import hre from "hardhat";
import { createPublicClient, encodeFunctionData, keccak256, pad, toHex, webSocket, type Hex } from "viem";
import { WebSocket } from "ws";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { localAccount } from "../../src/harness/accounts.js";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { serveJsonRpc, type JsonRpcBridge, type RequestProvider } from "../../src/harness/rpc-bridge.js";
import { postJson } from "../helpers/http.js";
import { recordRpc, rpc, type RpcRecorder, type WireResponse } from "../helpers/rpc.js";
import { waitUntil } from "../helpers/wait.js";

const TRANSFER_TOPIC = keccak256(toHex("Transfer(address,address,uint256)"));
// "No more notifications" is checked after a later answer on the same socket (messages on one socket come
// in order: a notification sent before it has arrived), or after a later block's own notification.

/** An `eth_subscription` message as it comes over the wire. */
interface Notification {
  jsonrpc: string;
  method: string;
  params: { subscription: string; result: { number?: Hex; address?: Hex; topics?: Hex[] } };
}

/** A raw WebSocket client: answers come back one per `send`, notifications are collected. */
interface RawClient {
  ws: WebSocket;
  notifications: Notification[];
  /** Sends `payload` (a string as is, anything else as JSON) and resolves with the next answer. */
  send(payload: unknown): Promise<unknown>;
  /** Sends one request and returns its result (throws on a JSON-RPC error). */
  call<T = unknown>(method: string, params?: unknown[]): Promise<T>;
  closed: Promise<{ code: number }>;
}

let nextId = 1;

async function connect(url: string): Promise<RawClient> {
  const ws = new WebSocket(url);
  const notifications: Notification[] = [];
  const waiting: Array<(message: unknown) => void> = [];
  ws.on("message", (data) => {
    const message = JSON.parse(String(data)) as { method?: string };
    if (message.method === "eth_subscription") notifications.push(message as Notification);
    else waiting.shift()?.(message);
  });
  const closed = new Promise<{ code: number }>((resolve) => ws.once("close", (code) => resolve({ code })));
  await once(ws, "open");
  const send = (payload: unknown) =>
    new Promise<unknown>((resolve) => {
      waiting.push(resolve);
      ws.send(typeof payload === "string" ? payload : JSON.stringify(payload));
    });
  return {
    ws,
    notifications,
    send,
    async call<T>(method: string, params: unknown[] = []) {
      const response = (await send({ jsonrpc: "2.0", id: nextId++, method, params })) as WireResponse;
      if (response.error) throw new Error(`${method}: ${response.error.message}`);
      return response.result as T;
    },
    closed,
  };
}

const mochaIt = it;

describe("local chain over WebSocket (src/harness/rpc-bridge.ts)", function () {
  let chain: LocalChain;
  /** A second bridge over the chain's provider whose requests are recorded. */
  let recorded: JsonRpcBridge;
  let recorder: RpcRecorder;
  /** The provider's "message" listeners with no subscription open. */
  let baseline: number;
  const clients: RawClient[] = [];
  const open = async (url: string) => {
    const client = await connect(url);
    clients.push(client);
    return client;
  };
  const listeners = () => chain.provider.listenerCount("message");
  const head = async () => BigInt(await rpc<string>(chain.rpcUrl, "eth_blockNumber"));
  const mine = () => rpc(chain.rpcUrl, "evm_mine");
  const bridgeOver = (provider: RequestProvider, options: { bodyLimitBytes?: number } = {}) =>
    serveJsonRpc(provider, { port: 0, role: "cronos-testnet-rpc", ...options });
  const withEvents = (request: RequestProvider["request"]): RequestProvider => ({
    request,
    on: (event, listener) => chain.provider.on(event, listener),
    removeListener: (event, listener) => chain.provider.removeListener(event, listener),
  });
  /** Subscription ids whose eth_unsubscribe through the recorded bridge the provider has answered. */
  const unsubscribed: string[] = [];

  before(async () => {
    chain = await startLocalChain({ hre, network: "cronos-testnet", port: 0, buyers: 1 });
    recorder = recordRpc(chain.provider);
    recorded = await bridgeOver(
      withEvents(async (args) => {
        const result = await recorder.provider.request(args);
        if (args.method === "eth_unsubscribe") unsubscribed.push((args.params as string[])[0]!);
        return result;
      }),
    );
    baseline = listeners();
  });
  afterEach(async () => {
    for (const client of clients.splice(0)) {
      client.ws.terminate();
      await client.closed;
    }
  });

  /** A test that then closes its sockets and checks, in the test itself, that it left the provider as it found it. */
  const it = (title: string, body: () => Promise<void>) =>
    mochaIt(title, async () => {
      await body();
      for (const client of clients.splice(0)) {
        client.ws.terminate();
        await client.closed;
      }
      await waitUntil("the provider's listeners as before the test", () => listeners() === baseline);
    });
  after(async () => {
    await recorded?.close();
    await chain?.stop();
  });

  it("serves the chain on ws:// at the HTTP port: viem's webSocket transport reads chain id 338 and the head", async () => {
    expect(chain.wsUrl).to.equal(`ws://127.0.0.1:${chain.port}`);
    expect(recorded.wsUrl).to.equal(`ws://127.0.0.1:${recorded.port}`);
    const client = createPublicClient({ transport: webSocket(chain.wsUrl) });
    try {
      expect(await client.getChainId()).to.equal(338);
      expect(await client.getBlockNumber({ cacheTime: 0 })).to.equal(await head());
    } finally {
      (await client.transport.getRpcClient()).close();
    }
  });

  it("answers a batch over one socket in order, exactly as the HTTP side answers it", async () => {
    const client = await open(chain.wsUrl);
    const from = chain.buyers[0]!.address;
    // transfer(to, 2^255) from a buyer reverts: code 3 with the revert data.
    const revertData = encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [from, 2n ** 255n] });
    const batch = [
      { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: "two", method: "eth_no_such_method", params: [] },
      { jsonrpc: "2.0", id: 3, method: "eth_call", params: [{ from, to: chain.token, data: revertData }, "latest"] },
      { jsonrpc: "2.0", method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: 5 },
      { jsonrpc: "2.0", id: 6, method: "net_version" },
    ];
    const overWs = (await client.send(batch)) as WireResponse[];
    expect(overWs).to.deep.equal((await postJson(chain.rpcUrl, batch)).json);
    expect(overWs.map((r) => r.id)).to.deep.equal([1, "two", 3, 5, 6]);
    expect(overWs[0]!.result).to.equal("0x152");
    expect(overWs[1]!.error?.code).to.be.a("number");
    expect(overWs[2]!.error?.code).to.equal(3);
    expect(overWs[2]!.error?.data).to.match(/^0x08c379a0/);
    expect(overWs[3]!.error?.code).to.equal(-32600);
    expect(overWs[4]!.result).to.equal("338");
    // Only notifications: no answer at all (HTTP answers 204); the next answer is the next request's.
    expect(await client.send([{ jsonrpc: "2.0", method: "eth_chainId", params: [] }, { jsonrpc: "2.0", id: 9, method: "eth_chainId" }])).to.deep.equal([
      { jsonrpc: "2.0", id: 9, result: "0x152" },
    ]);
    client.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "eth_chainId" }));
    expect(await client.send({ jsonrpc: "2.0", id: 10, method: "eth_chainId" })).to.deep.equal({ jsonrpc: "2.0", id: 10, result: "0x152" });
  });

  it("answers a parse error with -32700 and an empty batch with -32600, as over HTTP, and keeps the socket open", async () => {
    const client = await open(chain.wsUrl);
    const parse = (await client.send("{not json")) as WireResponse;
    expect(parse).to.deep.equal((await postJson(chain.rpcUrl, "{not json")).json);
    expect(parse).to.deep.include({ jsonrpc: "2.0", id: null });
    expect(parse.error?.code).to.equal(-32700);
    expect(parse.error?.message).to.match(/^Parse error: /);
    const empty = await client.send([]);
    expect(empty).to.deep.equal({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid request: empty batch" } });
    expect(await client.call("eth_chainId")).to.equal("0x152");
  });

  it("viem's watchBlockNumber over WebSocket subscribes (no eth_blockNumber polling) and gets each mined block", async () => {
    const client = createPublicClient({ transport: webSocket(recorded.wsUrl) });
    recorder.reset();
    const seen: bigint[] = [];
    const errors: Error[] = [];
    const unwatch = client.watchBlockNumber({ onBlockNumber: (n) => seen.push(n), onError: (e) => errors.push(e) });
    try {
      expect(await waitUntil(async () => recorder.count("eth_subscribe") === 1, 5_000)).to.equal(true);
      const start = await head();
      await mine();
      expect(await waitUntil(async () => seen.length === 1, 5_000)).to.equal(true);
      await mine();
      expect(await waitUntil(async () => seen.length === 2, 5_000)).to.equal(true);
      // A later block's notification: none came twice, none was skipped.
      await mine();
      await waitUntil("the third block's notification", () => seen.length >= 3);
      expect(seen).to.deep.equal([start + 1n, start + 2n, start + 3n]);
      expect(errors).to.deep.equal([]);
      // The mining went through the chain's own HTTP URL: all this bridge saw is the watcher's subscription.
      expect(recorder.methods()).to.deep.equal(["eth_subscribe"]);
      expect(recorder.calls[0]!.params).to.deep.equal(["newHeads"]);
      expect(listeners()).to.equal(baseline + 1);
      unwatch();
      expect(await waitUntil(async () => recorder.count("eth_unsubscribe") === 1, 5_000)).to.equal(true);
      expect(await waitUntil(async () => listeners() === baseline, 2_000)).to.equal(true);
    } finally {
      unwatch();
      // An open viem socket (keep-alive timer, reconnects) would keep the test process alive.
      (await client.transport.getRpcClient()).close();
    }
  });

  it("sends newHeads to the subscribing socket only, once per block with its subscription id, until eth_unsubscribe", async () => {
    const subscriber = await open(chain.wsUrl);
    const other = await open(chain.wsUrl);
    const bystander = await open(chain.wsUrl);
    const id = await subscriber.call<string>("eth_subscribe", ["newHeads"]);
    const otherId = await other.call<string>("eth_subscribe", ["newHeads"]);
    expect(id).to.match(/^0x[0-9a-f]+$/);
    expect(otherId).to.not.equal(id);
    // Another socket's subscription is not the bystander's to end.
    expect(await bystander.call("eth_unsubscribe", [id])).to.equal(false);
    const start = await head();
    for (let i = 0; i < 3; i++) await mine();
    expect(await waitUntil(async () => subscriber.notifications.length >= 3 && other.notifications.length >= 3, 5_000)).to.equal(true);
    await Promise.all([subscriber, other, bystander].map((client) => client.call("eth_chainId")));
    for (const [client, own] of [[subscriber, id], [other, otherId]] as const) {
      expect(client.notifications.map((n) => ({ jsonrpc: n.jsonrpc, method: n.method, subscription: n.params.subscription }))).to.deep.equal(
        Array(3).fill({ jsonrpc: "2.0", method: "eth_subscription", subscription: own }),
      );
      expect(client.notifications.map((n) => BigInt(n.params.result.number!))).to.deep.equal([start + 1n, start + 2n, start + 3n]);
    }
    expect(bystander.notifications).to.deep.equal([]);

    expect(await subscriber.call("eth_unsubscribe", [id])).to.equal(true);
    await mine();
    expect(await waitUntil(async () => other.notifications.length === 4, 5_000)).to.equal(true);
    await Promise.all([subscriber, other, bystander].map((client) => client.call("eth_chainId")));
    expect(subscriber.notifications).to.have.length(3);
    expect(other.notifications).to.have.length(4);
    expect(bystander.notifications).to.deep.equal([]);
  });

  it("sends logs subscriptions their matching logs (a token transfer sent over HTTP)", async () => {
    const client = await open(chain.wsUrl);
    const id = await client.call<string>("eth_subscribe", ["logs", { address: chain.token, topics: [TRANSFER_TOPIC] }]);
    const from = chain.buyers[0]!.address;
    const to = localAccount(1).address;
    const data = encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [to, 1n] });
    await rpc(chain.rpcUrl, "eth_sendTransaction", [{ from, to: chain.token, data }]);
    expect(await waitUntil(async () => client.notifications.length >= 1, 5_000)).to.equal(true);
    await client.call("eth_chainId");
    expect(client.notifications).to.have.length(1);
    const { subscription, result } = client.notifications[0]!.params;
    expect(subscription).to.equal(id);
    expect(result.address?.toLowerCase()).to.equal(chain.token.toLowerCase());
    expect(result.topics).to.deep.equal([TRANSFER_TOPIC, pad(from.toLowerCase() as Hex), pad(to.toLowerCase() as Hex)]);
  });

  it("ends a closed socket's subscriptions at the provider and removes its listener, cycle after cycle", async () => {
    expect(baseline).to.be.greaterThan(0);
    for (let cycle = 0; cycle < 5; cycle++) {
      const [a, b] = [await open(recorded.wsUrl), await open(recorded.wsUrl)];
      const ids = [await a.call<string>("eth_subscribe", ["newHeads"]), await a.call<string>("eth_subscribe", ["newHeads"]), await b.call<string>("eth_subscribe", ["newHeads"])];
      expect(new Set(ids).size).to.equal(3);
      // One listener routes for every socket.
      expect(listeners()).to.equal(baseline + 1);
      a.ws.close();
      await a.closed;
      // b still listens: a's close must not cut it off.
      await mine();
      expect(await waitUntil(async () => b.notifications.length === 1, 5_000)).to.equal(true);
      b.ws.close();
      await b.closed;
      expect(await waitUntil(async () => listeners() === baseline, 2_000), `listeners after cycle ${cycle}`).to.equal(true);
      expect(await waitUntil(async () => ids.every((id) => unsubscribed.includes(id)), 2_000), `unsubscribed after cycle ${cycle}`).to.equal(true);
      // Gone at the provider: unsubscribing again finds nothing.
      for (const id of ids) expect(await rpc(chain.rpcUrl, "eth_unsubscribe", [id]), `subscription ${id}`).to.equal(false);
      expect(a.notifications).to.deep.equal([]);
    }
  });

  it("bridge.close() closes open WebSockets (1001), ends their subscriptions and refuses new ones", async () => {
    const bridge = await bridgeOver(withEvents((args) => chain.provider.request(args as { method: string; params?: unknown[] })));
    const subscribed = await connect(bridge.wsUrl);
    const idle = await connect(bridge.wsUrl);
    const id = await subscribed.call<string>("eth_subscribe", ["newHeads"]);
    expect(listeners()).to.equal(baseline + 1);
    await bridge.close();
    expect(await subscribed.closed).to.deep.equal({ code: 1001 });
    expect(await idle.closed).to.deep.equal({ code: 1001 });
    // Ended at the provider by the time close() resolved.
    expect(await rpc(chain.rpcUrl, "eth_unsubscribe", [id])).to.equal(false);
    expect(listeners()).to.equal(baseline);
    const refused = new WebSocket(bridge.wsUrl);
    const [error] = (await once(refused, "error")) as [NodeJS.ErrnoException];
    expect(error.code).to.equal("ECONNREFUSED");
  });

  it("bounds a message like the HTTP body (1009 past the limit) and refuses eth_subscribe when the provider emits no events", async () => {
    const bridge = await bridgeOver({ request: (args) => chain.provider.request(args as { method: string; params?: unknown[] }) }, { bodyLimitBytes: 1024 });
    try {
      const client = await connect(bridge.wsUrl);
      expect(await client.send({ jsonrpc: "2.0", id: 1, method: "eth_subscribe", params: ["newHeads"] })).to.deep.equal({
        jsonrpc: "2.0",
        id: 1,
        error: { code: -32601, message: "eth_subscribe is not available: this endpoint's provider emits no events" },
      });
      expect(listeners()).to.equal(baseline);
      const big = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "eth_chainId", params: ["x".repeat(2_000)] });
      expect((await postJson(bridge.url, JSON.parse(big))).status).to.equal(413);
      client.ws.send(big);
      expect(await client.closed).to.deep.equal({ code: 1009 });
    } finally {
      await bridge.close();
    }
  });
});
