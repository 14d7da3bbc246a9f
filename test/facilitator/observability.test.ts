import { expect } from "chai";
import request from "supertest";
import type { OutcomeRecord } from "../../src/facilitator/http/app.js";
import { makePayment, openFacilitator, recordingLogger } from "../helpers/facilitator.js";

describe("facilitator observability", () => {
  it("tags every answer with a request id and reports one outcome per verify/settle", async () => {
    const records: OutcomeRecord[] = [];
    const opened = await openFacilitator("cronos-testnet", {}, { onOutcome: (r) => records.push(r) });
    const payment = await makePayment(opened.chain);
    const verify = await request(opened.app).post("/v2/x402/verify").set("X-Request-Id", "req-42").send(payment.body);
    expect(verify.headers["x-request-id"]).to.equal("req-42");
    const settle = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(settle.headers["x-request-id"]).to.match(/^[0-9a-f-]{36}$/);
    expect(records.map(({ durationMs: _d, requestId, ...rest }) => ({ requestId: requestId === "req-42" ? requestId : "uuid", ...rest }))).to.deep.equal([
      { requestId: "req-42", route: "verify", dialect: "cronos", status: 200, network: "cronos-testnet", payer: opened.buyer.address, payee: opened.seller.address, amount: "1000000", outcome: "valid", code: "valid" },
      { requestId: "uuid", route: "settle", dialect: "cronos", status: 200, network: "cronos-testnet", payer: opened.buyer.address, payee: opened.seller.address, amount: "1000000", outcome: "settled", code: "settled", txHash: settle.body.txHash },
    ]);
  });

  it("counts outcomes, latency, confirmation wait, rate limits and relayer gauges in its Prometheus registry", async () => {
    const records: OutcomeRecord[] = [];
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "1" }, { onOutcome: (r) => records.push(r) });
    const payment = await makePayment(opened.chain);
    await request(opened.app).post("/v2/x402/verify").send(payment.body);
    await request(opened.app).post("/v2/x402/verify").send(payment.body);
    await request(opened.app).post("/v2/x402/settle").send(payment.body);
    await request(opened.app).post("/v2/x402/settle").send(payment.body);
    const text = await opened.facilitator.metrics.registry.metrics();
    expect(text).to.include('x402_outcomes_total{route="verify",network="cronos-testnet",outcome="valid",dialect="cronos"} 1');
    expect(text).to.include('x402_outcomes_total{route="settle",network="cronos-testnet",outcome="settled",dialect="cronos"} 1');
    expect(text).to.include('x402_outcomes_total{route="settle",network="cronos-testnet",outcome="alreadyUsed",dialect="cronos"} 1');
    expect(text).to.include('x402_rate_limited_total{route="verify",by="ip"} 1');
    expect(text).to.include('x402_http_requests_total{route="/v2/x402/verify",status="429"} 1');
    expect(text).to.include('x402_settle_confirmation_seconds_count{network="cronos-testnet"} 1');
    expect(text).to.include('x402_relayer_nonce_gap{network="cronos-testnet",relayer="0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"} 0');
    const relayer = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720";
    expect(sample(text, `x402_relayer_balance_wei{network="cronos-testnet",relayer="${relayer}"}`)).to.equal(
      Number(await opened.chain.publicClient.getBalance({ address: relayer })),
    );

    // Latency: one observation per verify/settle answer (the 429 is not one), of the duration each answer took.
    for (const route of ["verify", "settle"] as const) {
      const seconds = records.filter((r) => r.route === route).map((r) => r.durationMs / 1000);
      expect(seconds, route).to.have.length(route === "verify" ? 1 : 2);
      expect(sample(text, `x402_request_duration_seconds_count{route="${route}"}`), route).to.equal(seconds.length);
      expect(sample(text, `x402_request_duration_seconds_sum{route="${route}"}`), route).to.be.closeTo(seconds.reduce((a, b) => a + b, 0), 1e-9);
      for (const le of [0.001, 0.01, 0.1, 1, 10]) {
        expect(sample(text, `x402_request_duration_seconds_bucket{le="${le}",route="${route}"}`), `${route} le ${le}`).to.equal(seconds.filter((s) => s <= le).length);
      }
    }
  });
});

describe("facilitator logs: RPC URLs by scheme and host only", () => {
  it("redacts every URL in the messages and fields it logs (an RPC error text carries the URL and its key)", async () => {
    const log = recordingLogger();
    const opened = await openFacilitator("cronos-testnet", {}, { logger: log.logger });
    log.lines.length = 0; // start-up lines (the relayer key lease) are not what this is about
    const viemText = "HTTP request failed.\n\nURL: https://rpc.example.com/v2/PATH-SECRET?apikey=QUERY-SECRET\nRequest body: {}";
    opened.facilitator.context.logger.warn(
      { err: viemText, nested: { urls: ["wss://user:pw@ws.example.com:8443/ws/SECRET"] }, cause: new Error("fetch https://rpc.example.com/SECRET failed") },
      "settle receipt not confirmed at https://rpc.example.com/v2/SECRET",
    );
    expect(log.lines).to.deep.equal([
      {
        level: "warn",
        fields: {
          err: "HTTP request failed.\n\nURL: https://rpc.example.com\nRequest body: {}",
          nested: { urls: ["wss://ws.example.com:8443"] },
          cause: "Error: fetch https://rpc.example.com failed",
        },
        message: "settle receipt not confirmed at https://rpc.example.com",
      },
    ]);
  });
});

/** The value of one sample (`name{labels}` exactly as exposed) in a Prometheus text page. */
function sample(text: string, series: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  expect(line, `no sample ${series}`).to.be.a("string");
  return Number(line!.slice(series.length + 1));
}
