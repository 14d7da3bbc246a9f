import { expect } from "chai";
import request from "supertest";
import type { OutcomeRecord } from "../../src/facilitator/http/app.js";
import { makePayment, openFacilitator } from "../helpers/facilitator.js";

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
      { requestId: "req-42", route: "verify", dialect: "cronos", status: 200, network: "cronos-testnet", payer: opened.buyer.address, amount: "1000000", outcome: "valid", code: "valid" },
      { requestId: "uuid", route: "settle", dialect: "cronos", status: 200, network: "cronos-testnet", payer: opened.buyer.address, amount: "1000000", outcome: "settled", code: "settled", txHash: settle.body.txHash },
    ]);
  });

  it("serves Prometheus metrics: outcomes, latency, confirmation wait, rate limits, relayer gauges", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "1" });
    const payment = await makePayment(opened.chain);
    await request(opened.app).post("/v2/x402/verify").send(payment.body);
    await request(opened.app).post("/v2/x402/verify").send(payment.body);
    await request(opened.app).post("/v2/x402/settle").send(payment.body);
    await request(opened.app).post("/v2/x402/settle").send(payment.body);
    const response = await request(opened.app).get("/metrics");
    expect(response.status).to.equal(200);
    expect(response.headers["content-type"]).to.match(/^text\/plain/);
    const text = response.text;
    expect(text).to.include('x402_outcomes_total{route="verify",network="cronos-testnet",outcome="valid",dialect="cronos"} 1');
    expect(text).to.include('x402_outcomes_total{route="settle",network="cronos-testnet",outcome="settled",dialect="cronos"} 1');
    expect(text).to.include('x402_outcomes_total{route="settle",network="cronos-testnet",outcome="alreadyUsed",dialect="cronos"} 1');
    expect(text).to.include('x402_rate_limited_total{route="verify"} 1');
    expect(text).to.include('x402_http_requests_total{route="/v2/x402/verify",status="429"} 1');
    expect(text).to.include('x402_settle_confirmation_seconds_count{network="cronos-testnet"} 1');
    expect(text).to.include('x402_relayer_nonce_gap{network="cronos-testnet",relayer="0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"} 0');
    expect(text).to.match(/x402_relayer_balance_wei\{network="cronos-testnet",relayer="0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"\} \d/);
  });
});
