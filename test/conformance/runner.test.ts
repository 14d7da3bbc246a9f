import { expect } from "chai";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { fail, skip, type Check } from "../../src/conformance/check.js";
import { createFacilitatorHttp } from "../../src/conformance/http.js";
import { runChecks, selectChecks } from "../../src/conformance/runner.js";
import type { Target } from "../../src/conformance/target.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { listen, type Listening } from "../helpers/http.js";

const TESTNET: Target = {
  network: "cronos-testnet",
  chainId: 338,
  token: NETWORKS["cronos-testnet"].token,
  domain: NETWORKS["cronos-testnet"].domain,
  payTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
};

function check(id: string, extra: Partial<Check> = {}): Check {
  return { id, title: id, spec: "spec", dialect: "cronos", run: async () => {}, ...extra };
}

describe("conformance runner", () => {
  let server: Listening;
  let answers: Array<{ status: number; headers?: Record<string, string>; body: string }>;
  let seen: string[];
  before(async () => {
    server = await listen((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      const answer = answers.shift() ?? { status: 200, body: "{}" };
      res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
      res.end(answer.body);
    });
  });
  after(() => server.close());
  beforeEach(() => {
    answers = [];
    seen = [];
  });

  it("selects checks by id or id@network, with * as a wildcard", () => {
    const checks = [check("verify.expired", { target: TESTNET }), check("verify.accepts", { target: TESTNET }), check("settle.pays", { target: TESTNET }), check("health.shape")];
    const ids = (patterns?: string[]) => selectChecks(checks, patterns).map((c) => c.id);
    expect(ids()).to.deep.equal(["verify.expired", "verify.accepts", "settle.pays", "health.shape"]);
    expect(ids(["verify.*"])).to.deep.equal(["verify.expired", "verify.accepts"]);
    expect(ids(["settle.pays@cronos-testnet", "health.shape"])).to.deep.equal(["settle.pays", "health.shape"]);
    expect(ids(["*@cronos-mainnet"])).to.deep.equal([]);
    expect(ids(["verify.e(x)pired"])).to.deep.equal([]);
  });

  it("skips a check whose needs are not met, naming the option that meets them, runs quota-spending checks last, and reports each result in order", async () => {
    const ran: string[] = [];
    const buyer = privateKeyToAccount(generatePrivateKey());
    const checks = [
      check("rate", { needs: ["rate-limit"], last: true, run: async () => void ran.push("rate") }),
      check("paid", { target: TESTNET, needs: ["buyer", "settle"], run: async () => void ran.push("paid") }),
      check("paid-with-buyer", { target: { ...TESTNET, buyer }, needs: ["buyer", "settle"], run: async () => void ran.push("paid-with-buyer") }),
      check("chain", { target: { ...TESTNET, buyer }, needs: ["rpc"] }),
      check("fails", { run: async () => fail('"Invalid amount: 9999"', '"Amount mismatch"') }),
      check("skips itself", { run: async () => skip("the buyer used no nonce") }),
      check("throws", {
        run: async () => {
          throw Object.assign(new Error("long message\nwith a stack"), { shortMessage: "RPC said no" });
        },
      }),
      check("passes with a note", { run: async () => "tx 0xabc" }),
    ];
    const streamed: string[] = [];
    const report = await runChecks({
      http: createFacilitatorHttp({ baseUrl: server.url }),
      checks,
      permissions: { settle: true, rateLimit: true },
      onResult: (result) => streamed.push(result.id),
    });
    expect(ran).to.deep.equal(["paid-with-buyer", "rate"]);
    expect(streamed).to.deep.equal(["paid", "paid-with-buyer", "chain", "fails", "skips itself", "throws", "passes with a note", "rate"]);
    expect(report.results.map((r) => [r.id, r.status, r.message])).to.deep.equal([
      ["paid", "skipped", "needs a funded buyer key (--buyer-key-file PATH or --buyer-key 0x…)"],
      ["paid-with-buyer", "passed", undefined],
      ["chain", "skipped", "needs the network's JSON-RPC (--rpc URL)"],
      ["fails", "failed", 'expected "Invalid amount: 9999", got "Amount mismatch"'],
      ["skips itself", "skipped", "the buyer used no nonce"],
      ["throws", "failed", "error: Error: RPC said no"],
      ["passes with a note", "passed", "tx 0xabc"],
      ["rate", "passed", undefined],
    ]);
    expect(report.summary).to.deep.equal({ total: 8, passed: 3, failed: 2, skipped: 3 });
    expect(report.results[1]!.network).to.equal("cronos-testnet");

    const withoutPermissions = await runChecks({ http: createFacilitatorHttp({ baseUrl: server.url }), checks: checks.slice(0, 3), permissions: { settle: false, rateLimit: false } });
    expect(withoutPermissions.results.map((r) => [r.id, r.message])).to.deep.equal([
      ["paid", "needs a funded buyer key (--buyer-key-file PATH or --buyer-key 0x…)"],
      ["paid-with-buyer", "needs --settle (settles 1 unit = 0.000001 USDC.e twice per dialect from the buyer key)"],
      ["rate", "needs --rate-limit (spends this IP's verify and settle quota for up to a minute)"],
    ]);
  });

  it("waits out a 429 as Retry-After says (telling the watcher), unless the check asked to see it", async () => {
    const waits: number[] = [];
    const lines: string[] = [];
    const http = createFacilitatorHttp({ baseUrl: server.url, sleep: async (ms) => void waits.push(ms), onWait: (line) => lines.push(line) });
    answers = [
      { status: 429, headers: { "retry-after": "7" }, body: '{"error":"Too many requests","retryAfter":7}' },
      { status: 429, body: '{"error":"Too many requests","retryAfter":3}' },
      { status: 200, body: '{"isValid":true,"invalidReason":null}' },
    ];
    const answer = await http.post("/v2/x402/verify", { x402Version: 1 });
    expect(answer.status).to.equal(200);
    expect(answer.json).to.deep.equal({ isValid: true, invalidReason: null });
    expect(waits).to.deep.equal([7_000, 3_000]);
    expect(lines).to.deep.equal([
      "waiting 7 s: the facilitator's rate limit on /v2/x402/verify (Retry-After)",
      "waiting 3 s: the facilitator's rate limit on /v2/x402/verify (Retry-After)",
    ]);
    expect(seen).to.deep.equal(["POST /v2/x402/verify", "POST /v2/x402/verify", "POST /v2/x402/verify"]);

    answers = [{ status: 429, headers: { "retry-after": "7" }, body: "{}" }];
    const limited = await http.request({ method: "POST", path: "/v2/x402/settle", body: {}, acceptRateLimit: true });
    expect(limited.status).to.equal(429);
    expect(waits).to.have.length(2);
  });

  it("gives up waiting once the waits would pass its bound, and answers the 429", async () => {
    const waits: number[] = [];
    const http = createFacilitatorHttp({ baseUrl: server.url, sleep: async (ms) => void waits.push(ms), maxRateLimitWaitMs: 100_000 });
    answers = Array.from({ length: 5 }, () => ({ status: 429, headers: { "retry-after": "60" }, body: "{}" }));
    expect((await http.get("/v2/x402/supported")).status).to.equal(429);
    expect(waits).to.deep.equal([60_000]);
  });
});
