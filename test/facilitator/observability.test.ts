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
      { requestId: "req-42", route: "verify", status: 200, network: "cronos-testnet", payer: opened.buyer.address, amount: "1000000", outcome: "valid", code: "valid" },
      { requestId: "uuid", route: "settle", status: 200, network: "cronos-testnet", payer: opened.buyer.address, amount: "1000000", outcome: "settled", code: "settled", txHash: settle.body.txHash },
    ]);
  });

  it("counts outcomes, latency, confirmation wait, rate limits and relayer gauges in its Prometheus registry", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "1" });
    const payment = await makePayment(opened.chain);
    await request(opened.app).post("/v2/x402/verify").send(payment.body);
    await request(opened.app).post("/v2/x402/verify").send(payment.body);
    await request(opened.app).post("/v2/x402/settle").send(payment.body);
    await request(opened.app).post("/v2/x402/settle").send(payment.body);
    const text = await opened.facilitator.metrics.registry.metrics();
    expect(text).to.include('x402_outcomes_total{route="verify",network="cronos-testnet",outcome="valid"} 1');
    expect(text).to.include('x402_outcomes_total{route="settle",network="cronos-testnet",outcome="settled"} 1');
    expect(text).to.include('x402_outcomes_total{route="settle",network="cronos-testnet",outcome="alreadyUsed"} 1');
    expect(text).to.include('x402_rate_limited_total{route="verify",by="ip"} 1');
    expect(text).to.include('x402_http_requests_total{route="/v2/x402/verify",status="429"} 1');
    expect(text).to.include('x402_settle_confirmation_seconds_count{network="cronos-testnet"} 1');
    expect(text).to.include('x402_relayer_nonce_gap{network="cronos-testnet",relayer="0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"} 0');
    expect(text).to.match(/x402_relayer_balance_wei\{network="cronos-testnet",relayer="0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"\} \d/);
  });
});

describe("facilitator logs: RPC URLs by scheme and host only", () => {
  it("redacts every URL in the messages and fields it logs (an RPC error text carries the URL and its key)", async () => {
    const log = recordingLogger();
    const opened = await openFacilitator("cronos-testnet", {}, { logger: log.logger });
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
