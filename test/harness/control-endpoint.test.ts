import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { expect } from "chai";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { startFacilitator } from "../../src/facilitator/start.js";
import { localAccount } from "../../src/harness/accounts.js";
import { connectHarness } from "../../src/harness/control/client.js";
import type { LocalHarness } from "../../src/harness/control/harness.js";
import { HarnessRefusal, serveHarness } from "../../src/harness/control/server.js";
import { CONTROL_BODY_LIMIT_BYTES, HarnessControlError, MAX_FAULTS, type FaultInfo } from "../../src/harness/control/spec.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { RequestError } from "../../src/protocol/reasons.js";
import { paymentRequirements } from "../../src/seller/index.js";
import { rpcClient } from "../helpers/chain.js";
import { startFacilitatorOnChain } from "../helpers/facilitator.js";
import { closedPortUrl, fetchJson, listen, rawRequest } from "../helpers/http.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";
import { WAIT_MS } from "../helpers/wait.js";
import { skipBecause } from "../helpers/skip.js";

// The control endpoint (/harness/...) as another process and another language reach it: JSON over HTTP on
// 127.0.0.1, the curl lines of docs/failures.md, connectHarness; and what it refuses.

/** A request to the endpoint as curl sends it: JSON body when given, no Origin; the answer as `json`. */
async function call(url: string, method: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: any }> {
  const answer = await fetchJson(url, { method, body, headers });
  return { status: answer.status, json: answer.body };
}

describe("harness control endpoint: the fault and time controls over HTTP, loopback only", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  let base: string;
  const paused = () => rpcClient(stack.networks["cronos-testnet"]!.rpcUrl).readContract({ address: stack.networks["cronos-testnet"]!.token, abi: tokenAbi, functionName: "paused" });
  const live = async () => ((await call(`${base}/faults`, "GET")).json as FaultInfo[]).filter((fault) => fault.state === "armed" || fault.state === "active");

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 1 });
    base = stack.harnessUrl;
  });
  after(() => stack?.stop());
  afterEach(async () => {
    await stack.harness.reset();
  });

  it("serves on 127.0.0.1 under /harness, a port of its own (the facilitator's port has no /harness)", async () => {
    expect(base).to.match(/^http:\/\/127\.0\.0\.1:\d+\/harness$/);
    expect(new URL(base).port).not.to.equal(new URL(stack.facilitatorUrl).port);
    expect(await call(`${stack.facilitatorUrl}/harness`, "GET")).to.deep.equal({ status: 404, json: { error: RequestError.notFound } });
    expect(await call(`${stack.facilitatorUrl}/harness/faults`, "POST", { kind: "busy", forSeconds: 5 })).to.deep.equal({ status: 404, json: { error: RequestError.notFound } });
  });

  it("the curl lines of docs/failures.md: POST /faults makes a fault (201), GET /faults lists it, DELETE /faults/ID undoes it (idempotent), GET /harness tells the state", async () => {
    const made = await call(`${base}/faults`, "POST", { kind: "pause" });
    expect(made.status).to.equal(201);
    expect(made.json).to.deep.include({ kind: "pause", state: "active", spec: { kind: "pause", trigger: "now" }, description: "USDC.e paused" });
    expect(await paused()).to.equal(true);
    expect((await live()).map((fault) => fault.id)).to.deep.equal([made.json.id]);
    const state = await call(base, "GET");
    expect(state.status).to.equal(200);
    expect(state.json.facilitator).to.deep.equal({ url: stack.facilitatorUrl, running: true });
    expect(state.json.networks["cronos-testnet"]).to.include({ blocks: "running" });
    expect(await call(`${base}/faults/${made.json.id}`, "GET")).to.deep.include({ status: 200 });
    const undone = await call(`${base}/faults/${made.json.id}`, "DELETE");
    expect(undone.status).to.equal(200);
    expect(undone.json).to.deep.include({ id: made.json.id, state: "ended" });
    expect(await paused()).to.equal(false);
    expect((await call(`${base}/faults/${made.json.id}`, "DELETE")).json.state).to.equal("ended");
    expect(await call(`${base}/faults/f9999`, "DELETE")).to.deep.equal({ status: 404, json: { error: 'no fault "f9999" (armed, in force or recently ended)' } });
    expect(await call(`${base}/faults/f9999`, "GET")).to.deep.equal({ status: 404, json: { error: 'no fault "f9999" (armed, in force or recently ended)' } });
  });

  it("time: POST /time/advance moves the clock; /time/stop-blocks and /time/resume-blocks stop and resume mining; POST /facilitator/restart restarts it on its URL", async () => {
    const before = (await call(base, "GET")).json.networks["cronos-testnet"].chainTime as number;
    const advanced = await call(`${base}/time/advance`, "POST", { seconds: 90 });
    expect(advanced.status).to.equal(200);
    expect(advanced.json.chainTime["cronos-testnet"]).to.be.at.least(before + 90);
    const stopped = await call(`${base}/time/stop-blocks`, "POST");
    expect(stopped).to.deep.include({ status: 201 });
    expect(stopped.json).to.include({ kind: "blocks", state: "active" });
    expect((await call(base, "GET")).json.networks["cronos-testnet"].blocks).to.equal("stopped");
    expect(await call(`${base}/time/resume-blocks`, "POST", {})).to.deep.equal({ status: 200, json: { resumed: 1 } });
    expect((await call(base, "GET")).json.networks["cronos-testnet"].blocks).to.equal("running");
    const before2 = stack.facilitator;
    expect(await call(`${base}/facilitator/restart`, "POST")).to.deep.equal({ status: 200, json: { facilitatorUrl: stack.facilitatorUrl } });
    expect(stack.facilitator).not.to.equal(before2);
    expect((await fetch(`${stack.facilitatorUrl}/v2/x402/supported`)).status).to.equal(200);
  });

  it("connectHarness: the same controls from another process's point of view (busy seen at the facilitator, undone through the handle); refusals as HarnessControlError", async () => {
    const remote = connectHarness(base);
    const busy = await remote.fault({ kind: "busy", forSeconds: 20 });
    expect(busy.info).to.include({ kind: "busy", state: "active" });
    const verify = await fetch(`${stack.facilitatorUrl}/v2/x402/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(verify.status).to.equal(429);
    expect(Number(verify.headers.get("retry-after"))).to.be.within(19, 20);
    expect((await busy.undo()).state).to.equal("ended");
    expect((await fetch(`${stack.facilitatorUrl}/v2/x402/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).to.equal(400);
    // An armed fault over HTTP: its amount a bigint in TypeScript, a string on the wire.
    const buyer = privateKeyToAccount(stack.networks["cronos-testnet"]!.buyers[0]!.privateKey);
    const armed = await remote.fault({ kind: "balance", address: buyer.address, amount: 0n, trigger: "after-verify" });
    expect(armed.info.spec).to.deep.equal({ kind: "balance", address: buyer.address, amount: "0", trigger: "after-verify" });
    expect(await remote.reset()).to.equal(1);
    const times = await remote.advanceTime(5);
    expect(Object.keys(times)).to.deep.equal(["cronos-testnet"]);
    const refused = await remote.fault({ kind: "busy", forSeconds: 0 }).catch((error: unknown) => error);
    expect(refused).to.be.instanceOf(HarnessControlError);
    expect(refused).to.include({ status: 400, message: "forSeconds must be from 1 to 3600" });
    const gone = await connectHarness(`${await closedPortUrl()}/harness`).status().catch((error: unknown) => error);
    expect(gone).to.be.instanceOf(HarnessControlError);
    expect((gone as HarnessControlError).message).to.match(/^cannot reach the harness at http:\/\/127\.0\.0\.1:\d+\/harness: ECONNREFUSED$/);
  });

  it("connectHarness against a frozen endpoint (it takes the connection and never answers, or sends the head and stops) gives up at its time-out with one line", async () => {
    const silent = await listen(() => undefined);
    const halfway = await listen((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"facilitator":');
    });
    try {
      for (const frozen of [silent, halfway]) {
        const error = await connectHarness(`${frozen.url}/harness`, { timeoutMs: 500 }).status().catch((caught: unknown) => caught);
        expect(error, frozen === silent ? "silent" : "halfway").to.be.instanceOf(HarnessControlError);
        expect(error).to.include({ status: 0, message: `the harness at ${frozen.url}/harness did not answer within 0.5 s` });
      }
    } finally {
      await silent.close();
      await halfway.close();
    }
  });

  describe("what it refuses (an attacker's requests change nothing)", () => {
    it("a foreign Host (DNS rebinding: a page on its own name resolved to 127.0.0.1): 421; none: 400; nothing made", async () => {
      // No Host at all: Node's HTTP/1.1 server refuses it before anything runs.
      expect((await rawRequest(`${base}/faults`, { host: null, method: "POST", headers: { "Content-Type": "application/json" }, body: '{"kind":"pause"}' })).status).to.equal(400);
      for (const host of ["evil.example", "127.0.0.1.nip.io", "localhost.evil.example:80"]) {
        const answer = await rawRequest(`${base}/faults`, { host, method: "POST", headers: { "Content-Type": "application/json" }, body: '{"kind":"pause"}' });
        expect({ status: answer.status, body: answer.body }, host).to.deep.equal({ status: 421, body: { error: RequestError.misdirected } });
      }
      expect(await paused()).to.equal(false);
      expect(await live()).to.deep.equal([]);
    });

    it("any Origin (a browser page, cross-site or not): 403, nothing made", async () => {
      for (const origin of ["http://evil.example", "null", new URL(base).origin]) {
        expect(await call(`${base}/faults`, "POST", { kind: "pause" }, { origin }), origin).to.deep.equal({ status: 403, json: { error: HarnessRefusal.fromPage } });
      }
      expect(await paused()).to.equal(false);
    });

    it("a body that is not application/json (a form post) 415, not JSON 400, an array or a wrong shape 400, too large 413; an unknown path 404", async () => {
      const post = (body: string, type = "application/json") => fetch(`${base}/faults`, { method: "POST", headers: { "content-type": type }, body }).then(async (r) => ({ status: r.status, json: await r.json() }));
      expect(await post('{"kind":"pause"}', "text/plain")).to.deep.equal({ status: 415, json: { error: HarnessRefusal.notJson } });
      expect(await post("kind=pause", "application/x-www-form-urlencoded")).to.deep.equal({ status: 415, json: { error: HarnessRefusal.notJson } });
      expect(await post("{kind: pause")).to.deep.equal({ status: 400, json: { error: "Invalid request: the body is not valid JSON" } });
      expect(await post('"pause"')).to.deep.equal({ status: 400, json: { error: "Invalid request: the body is not valid JSON" } });
      expect(await post('[{"kind":"pause"}]')).to.deep.equal({ status: 400, json: { error: HarnessRefusal.notObject } });
      expect(await post("null")).to.deep.equal({ status: 400, json: { error: "Invalid request: the body is not valid JSON" } });
      expect(await post(JSON.stringify({ kind: "pause", padding: "x".repeat(CONTROL_BODY_LIMIT_BYTES) }))).to.deep.equal({ status: 413, json: { error: `Payload too large: the limit is ${CONTROL_BODY_LIMIT_BYTES} bytes` } });
      expect(await call(`${base}/time/advance`, "POST", { seconds: -5 })).to.deep.equal({ status: 400, json: { error: "seconds must be from 1 to 315360000" } });
      expect(await call(`${base}/time/advance`, "POST", { seconds: 5, extra: 1 })).to.deep.equal({ status: 400, json: { error: 'Unrecognized key: "extra"' } });
      expect(await call(`${base}/nothing`, "GET")).to.deep.equal({ status: 404, json: { error: HarnessRefusal.notFound } });
      expect(await call(`${new URL(base).origin}/`, "GET")).to.deep.equal({ status: 404, json: { error: HarnessRefusal.notFound } });
      expect(await paused()).to.equal(false);
      expect(await live()).to.deep.equal([]);
    });

    it("a non-loopback address of this machine reaches nothing: the endpoint listens on 127.0.0.1 alone", async function () {
      const external = Object.values(networkInterfaces())
        .flat()
        .find((address) => address && address.family === "IPv4" && !address.internal)?.address;
      if (!external) skipBecause(this, "this machine has no non-loopback IPv4 address", "condition");
      const outcome = await new Promise<string>((resolve) => {
        const socket = connect({ host: external, port: Number(new URL(base).port) });
        socket.once("connect", () => {
          socket.destroy();
          resolve("connected");
        });
        socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
      });
      expect(outcome).to.equal("ECONNREFUSED");
    });

    it(`a flood of faults: ${MAX_FAULTS} are held, the rest refused 409; one DELETE undoes them all`, async () => {
      const answers = await Promise.all(Array.from({ length: MAX_FAULTS + 50 }, () => call(`${base}/faults`, "POST", { kind: "pause", trigger: "after-verify" })));
      const statuses = answers.map((answer) => answer.status);
      expect(statuses.filter((status) => status === 201)).to.have.length(MAX_FAULTS);
      expect(statuses.filter((status) => status === 409)).to.have.length(50);
      expect(answers.find((answer) => answer.status === 409)!.json).to.deep.equal({ error: `${MAX_FAULTS} faults are armed or in force already: undo some first (DELETE /harness/faults undoes them all)` });
      expect(await live()).to.have.length(MAX_FAULTS);
      expect(await call(`${base}/faults`, "DELETE")).to.deep.equal({ status: 200, json: { undone: MAX_FAULTS } });
      expect(await live()).to.deep.equal([]);
      // The armed pauses never fired: a valid verify now pauses nothing.
      const buyer = privateKeyToAccount(stack.networks["cronos-testnet"]!.buyers[0]!.privateKey);
      const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: 1n });
      const verify = await call(`${stack.facilitatorUrl}/v2/x402/verify`, "POST", { x402Version: 1, paymentHeader: await createPaymentHeader({ signer: buyer, requirements }), paymentRequirements: requirements });
      expect(verify.json).to.deep.equal({ isValid: true, invalidReason: null });
      expect(await paused()).to.equal(false);
    });

    it("a client that never finishes its request is cut off at the headers time-out (a second endpoint on the same controls, with a 1 s time-out)", async () => {
      const endpoint = await serveHarness(stack.harness as LocalHarness, { headersTimeoutMs: 1_000 });
      try {
        const closed = await new Promise<string>((resolve) => {
          const socket = connect({ host: "127.0.0.1", port: endpoint.port }, () => socket.write("POST /harness/faults HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
          let answer = "";
          socket.on("data", (chunk) => (answer += chunk.toString()));
          socket.once("close", () => resolve(answer.split("\r\n")[0] ?? ""));
          // A deadline, not a wait: still open past it fails the test with what it says.
          setTimeout(() => resolve(`still open after ${WAIT_MS} ms`), WAIT_MS).unref();
        });
        expect(closed).to.equal("HTTP/1.1 408 Request Timeout");
      } finally {
        await endpoint.close();
      }
    });
  });
});

describe("harness control endpoint: absent from the production facilitator", function () {
  this.timeout(120_000);

  it("a facilitator started as in production (loadConfig + startFacilitator, no hooks) answers /harness/... 404 Not found", async () => {
    const { running: production } = await startFacilitatorOnChain();
    try {
      for (const [method, path, body] of [
        ["GET", "/harness", undefined],
        ["GET", "/harness/faults", undefined],
        ["POST", "/harness/faults", { kind: "busy", forSeconds: 5 }],
        ["POST", "/harness/time/advance", { seconds: 5 }],
        ["DELETE", "/harness/faults", undefined],
      ] as const) {
        expect(await call(`${production.url}${path}`, method, body), `${method} ${path}`).to.deep.equal({ status: 404, json: { error: RequestError.notFound } });
      }
    } finally {
      await production.close(0);
    }
  });

  it("the stack's faults do not reach a facilitator started as in production on the same chain: busy, the RPC refused and an armed after-verify pause leave its verify valid, while the stack's own answers 429", async () => {
    const stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 1 });
    const testnet = stack.networks["cronos-testnet"]!;
    const production = await startFacilitator(
      loadConfig({
        FACILITATOR_NETWORKS: "cronos-testnet",
        CRONOS_TESTNET_RPC_URL: testnet.rpcUrl,
        // Hardhat account #8: a PUBLIC test key, LOCAL-ONLY, used by nothing else here.
        RELAYER_PRIVATE_KEY: localAccount(8).privateKey,
        HOST: "127.0.0.1",
        PORT: "0",
        METRICS_PORT: "0",
      }),
    );
    try {
      const buyer = privateKeyToAccount(testnet.buyers[0]!.privateKey);
      await stack.harness.fault({ kind: "busy", forSeconds: 30 });
      await stack.harness.fault({ kind: "rpc", mode: "refuse" });
      const armed = await stack.harness.fault({ kind: "pause", trigger: "after-verify", payer: buyer.address });
      const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: 10_000n });
      const body = { x402Version: 1, paymentHeader: await createPaymentHeader({ signer: buyer, requirements }), paymentRequirements: requirements };
      expect(await call(`${production.url}/v2/x402/verify`, "POST", body)).to.deep.equal({ status: 200, json: { isValid: true, invalidReason: null } });
      expect((await call(`${stack.facilitatorUrl}/v2/x402/verify`, "POST", body)).status).to.equal(429);
      expect((await stack.harness.faults()).find((fault) => fault.id === armed.id)?.state).to.equal("armed");
      const paused = await rpcClient(testnet.rpcUrl).readContract({ address: testnet.token, abi: tokenAbi, functionName: "paused" });
      expect(paused).to.equal(false);
    } finally {
      await production.close(1_000);
      await stack.stop();
    }
  });
});
