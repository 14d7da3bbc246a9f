import { expect } from "chai";
import hre from "hardhat";
import { createPublicClient, getAddress, http, webSocket, type Hex } from "viem";
import { WebSocket } from "ws";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { BridgeRefusal } from "../../src/harness/rpc-bridge-guard.js";
import { rawRequest } from "../helpers/http.js";
import { rpc, type WireResponse } from "../helpers/rpc.js";

// Issue 39 item 4: the local chain's JSON-RPC bridge answered any web page. A CORS "simple" text/plain POST
// from a page (Origin http://evil.example), on a name rebound to 127.0.0.1 (Host rebind.evil.example), was
// answered hardhat_impersonateAccount → true and evm_increaseTime; a WebSocket opened from that Origin read
// eth_accounts. In fork mode what a page reads or signs there is valid on the real chain.

/** An account of nobody's: impersonated, the chain would send as it. */
const VICTIM: Hex = "0x00000000000000000000000000000000000b0b00";
const DAY = 86_400;

/** A POST to the bridge as a browser would send it (a simple request: text/plain), with the headers given (its `Host` as the Host); its status and body. */
async function post(port: number, body: unknown, headers: Record<string, string> & { Host: string }): Promise<{ status: number; json: WireResponse }> {
  const { Host, ...others } = headers;
  const answer = await rawRequest(`http://127.0.0.1:${port}/`, { host: Host, method: "POST", headers: { "Content-Type": "text/plain", ...others }, body: JSON.stringify(body) });
  return { status: answer.status, json: (typeof answer.body === "string" ? JSON.parse(answer.body) : answer.body) as WireResponse };
}

/** A WebSocket to the bridge with the given options: opened, or refused with its status and body. */
function openSocket(url: string, options: { origin?: string; headers?: Record<string, string> }): Promise<{ ws: WebSocket } | { status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options);
    ws.once("open", () => resolve({ ws }));
    ws.once("unexpected-response", (_req, res) => {
      let text = "";
      res.on("data", (chunk: Buffer) => (text += chunk.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    ws.once("error", reject);
  });
}

/** One call over an open WebSocket: its answer. */
function callOver(ws: WebSocket, method: string, params: unknown[] = []): Promise<WireResponse> {
  return new Promise((resolve) => {
    ws.once("message", (data) => resolve(JSON.parse(String(data)) as WireResponse));
    ws.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }));
  });
}

const refusal = (message: string) => ({ jsonrpc: "2.0", id: null, error: { code: -32600, message } });

describe("the local chain's JSON-RPC bridge turns web pages away (issue 39 item 4)", function () {
  this.timeout(120_000);
  let chain: LocalChain;
  let host: string;
  let ownOrigin: string;
  const latestTime = async () => BigInt((await rpc<{ timestamp: Hex }>(chain.rpcUrl, "eth_getBlockByNumber", ["latest", false])).timestamp);

  before(async () => {
    chain = await startLocalChain({ hre, network: "cronos-testnet", port: 0, buyers: 1 });
    host = `127.0.0.1:${chain.port}`;
    ownOrigin = `http://${host}`;
  });
  after(async () => {
    await chain?.stop();
  });

  it("a page's text/plain POST (Origin http://evil.example) on a rebound name is answered 421, on the bridge's own name 403: no impersonation, chain time not moved", async () => {
    const before = await latestTime();
    const calls = [
      { jsonrpc: "2.0", id: 1, method: "hardhat_impersonateAccount", params: [VICTIM] },
      { jsonrpc: "2.0", id: 2, method: "evm_increaseTime", params: [365 * DAY] },
      [{ jsonrpc: "2.0", id: 3, method: "evm_increaseTime", params: [365 * DAY] }],
    ];
    for (const call of calls) {
      expect(await post(chain.port, call, { Host: `rebind.evil.example:${chain.port}`, Origin: "http://evil.example" })).to.deep.equal({
        status: 421,
        json: refusal(BridgeRefusal.misdirected),
      });
      expect(await post(chain.port, call, { Host: host, Origin: "http://evil.example" })).to.deep.equal({ status: 403, json: refusal(BridgeRefusal.foreignOrigin) });
    }
    // A block mined now (by a tool, no Origin) is not a year ahead, and the chain does not send as the victim.
    await rpc(chain.rpcUrl, "evm_mine");
    expect((await latestTime()) - before).to.be.lessThan(DAY);
    const sent = await post(chain.port, { jsonrpc: "2.0", id: 4, method: "eth_sendTransaction", params: [{ from: VICTIM, to: VICTIM, value: "0x0" }] }, { Host: host });
    expect(sent).to.deep.equal({
      status: 200,
      json: { jsonrpc: "2.0", id: 4, error: { code: -32000, message: `Unknown account ${getAddress(VICTIM)}` } },
    });
  });

  it("every Origin but the bridge's own is refused 403: null, another port, https, another loopback name, another site", async () => {
    const call = { jsonrpc: "2.0", id: 1, method: "eth_accounts", params: [] };
    for (const origin of ["null", `http://127.0.0.1:${chain.port + 1}`, `https://${host}`, `http://localhost:${chain.port}`, "http://evil.example", "not an origin"]) {
      expect(await post(chain.port, call, { Host: host, Origin: origin }), origin).to.deep.equal({ status: 403, json: refusal(BridgeRefusal.foreignOrigin) });
    }
    // Its own origin (a page the bridge itself served), and no Origin at all (a tool), are answered.
    const own = await post(chain.port, call, { Host: host, Origin: ownOrigin });
    expect([own.status, Array.isArray(own.json.result)]).to.deep.equal([200, true]);
    expect((await post(chain.port, call, { Host: `localhost:${chain.port}`, Origin: `http://localhost:${chain.port}` })).status).to.equal(200);
  });

  it("a browser-extension wallet's origin (which no web page can send) is answered; a page naming that scheme in another form is refused", async () => {
    const call = { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] };
    for (const origin of ["chrome-extension://nkbihfbeogaeaoehlefnkodbefgpgknn", "moz-extension://0b7d4a1e-5c3f-4f0e-9a2b-1d2c3e4f5a6b", "safari-web-extension://ABCDEF12-3456"]) {
      expect(await post(chain.port, call, { Host: host, Origin: origin }), origin).to.deep.equal({ status: 200, json: { jsonrpc: "2.0", id: 1, result: "0x152" } });
    }
    for (const origin of ["http://chrome-extension.evil.example", "chrome-extension://evil.example/path", "chrome-extension:evil"]) {
      expect(await post(chain.port, call, { Host: host, Origin: origin }), origin).to.deep.equal({ status: 403, json: refusal(BridgeRefusal.foreignOrigin) });
    }
  });

  it("every Host but a loopback name is refused 421 (any port); the loopback names are answered", async () => {
    const call = { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] };
    for (const name of ["rebind.evil.example", `127.0.0.1.nip.io:${chain.port}`, `user@127.0.0.1:${chain.port}`, "10.0.0.1", `[::2]:${chain.port}`]) {
      expect(await post(chain.port, call, { Host: name }), name).to.deep.equal({ status: 421, json: refusal(BridgeRefusal.misdirected) });
    }
    for (const name of [host, `localhost:${chain.port}`, `LOCALHOST:${chain.port}`, `[::1]:${chain.port}`, "127.0.0.1"]) {
      expect(await post(chain.port, call, { Host: name }), name).to.deep.equal({ status: 200, json: { jsonrpc: "2.0", id: 1, result: "0x152" } });
    }
  });

  it("a WebSocket opened by a page of another origin, or on a rebound name, is refused before it opens: eth_accounts is never read", async () => {
    expect(await openSocket(chain.wsUrl, { origin: "http://evil.example" })).to.deep.equal({ status: 403, text: JSON.stringify(refusal(BridgeRefusal.foreignOrigin)) });
    expect(await openSocket(chain.wsUrl, { origin: "http://evil.example", headers: { Host: `rebind.evil.example:${chain.port}` } })).to.deep.equal({
      status: 421,
      text: JSON.stringify(refusal(BridgeRefusal.misdirected)),
    });
    // Its own origin, and a tool (no Origin), open and read.
    for (const options of [{ origin: ownOrigin }, {}]) {
      const opened = await openSocket(chain.wsUrl, options);
      if (!("ws" in opened)) throw new Error(`refused: ${JSON.stringify(opened)}`);
      try {
        expect((await callOver(opened.ws, "eth_chainId")).result).to.equal("0x152");
      } finally {
        opened.ws.terminate();
      }
    }
  });

  it("viem's http and webSocket transports (no Origin) work as before", async () => {
    expect(await createPublicClient({ transport: http(chain.rpcUrl) }).getChainId()).to.equal(338);
    const client = createPublicClient({ transport: webSocket(chain.wsUrl) });
    try {
      expect(await client.getChainId()).to.equal(338);
    } finally {
      (await client.transport.getRpcClient()).close();
    }
  });
});
