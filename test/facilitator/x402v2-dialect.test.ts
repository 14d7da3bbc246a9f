import { expect } from "chai";
import request from "supertest";
import { privateKeyToAccount } from "viem/accounts";
import type { OutcomeRecord } from "../../src/facilitator/http/app.js";
import { cancelAuthorization, HARDHAT_KEYS, makePayment, openFacilitator, openFlakyFacilitator, v2BodyOf, type MakePaymentOptions } from "../helpers/facilitator.js";
import { withoutTimestamp } from "../helpers/time.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;
type Made = Awaited<ReturnType<typeof makePayment>>;
type V2Body = ReturnType<typeof v2BodyOf>;
type Requirements = Record<string, unknown>;

const TX_HASH = /^0x[0-9a-f]{64}$/;
const OTHER_TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3";

async function post(opened: Opened, route: "verify" | "settle", body: object) {
  const response = await request(opened.app).post(`/v2/x402/${route}`).send(body);
  return { status: response.status, body: response.body as Record<string, unknown> };
}

/** A refusal case: how to make the payment, and how to change the requirements in each dialect. */
interface RefusalCase {
  name: string;
  code: string;
  options?: (opened: Opened, now: bigint) => MakePaymentOptions;
  cronos?: (requirements: Requirements) => Requirements;
  v2?: (requirements: Requirements) => Requirements;
  /** Runs on the chain before both dialects are asked. */
  before?: (opened: Opened, made: Made) => Promise<void>;
}

describe("facilitator: the x402 v2 dialect beside the Cronos one on /v2/x402", () => {
  let opened: Opened;
  const records: OutcomeRecord[] = [];
  before(async () => {
    opened = await openFacilitator("cronos-testnet", {}, { onOutcome: (record) => records.push(record) });
  });
  beforeEach(() => (records.length = 0));

  it("verifies and settles an x402 v2 body, answering v2 shapes with the payer, and moves USDC.e once", async () => {
    const made = await makePayment(opened.chain);
    const body = v2BodyOf(made);
    const payer = opened.buyer.address;
    const before = await opened.chain.contract.read.balanceOf([made.payTo]);

    expect(await post(opened, "verify", body)).to.deep.equal({ status: 200, body: { isValid: true, payer } });
    const settled = await post(opened, "settle", body);
    expect(settled.status).to.equal(200);
    expect(settled.body.transaction).to.match(TX_HASH);
    expect(settled.body).to.deep.equal({ success: true, payer, transaction: settled.body.transaction, network: "eip155:338" });
    expect(await opened.chain.contract.read.balanceOf([made.payTo])).to.equal(before + 1_000_000n);

    // The replay: refused with @x402/evm's code, the Cronos text as the message, and the spending transaction.
    expect(await post(opened, "verify", body)).to.deep.equal({
      status: 200,
      body: { isValid: false, invalidReason: "invalid_exact_evm_nonce_already_used", invalidMessage: "Authorization already used", payer },
    });
    expect(await post(opened, "settle", body)).to.deep.equal({
      status: 200,
      body: {
        success: false,
        errorReason: "invalid_exact_evm_nonce_already_used",
        errorMessage: "Authorization already used",
        payer,
        transaction: settled.body.transaction,
        network: "eip155:338",
      },
    });
    expect(await opened.chain.contract.read.balanceOf([made.payTo])).to.equal(before + 1_000_000n);

    // Logs and metrics say which dialect; the network is named as the checks saw it.
    expect(records.map(({ dialect, network, route, code }) => ({ dialect, network, route, code }))).to.deep.equal([
      { dialect: "x402v2", network: "cronos-testnet", route: "verify", code: "valid" },
      { dialect: "x402v2", network: "cronos-testnet", route: "settle", code: "settled" },
      { dialect: "x402v2", network: "cronos-testnet", route: "verify", code: "used" },
      { dialect: "x402v2", network: "cronos-testnet", route: "settle", code: "alreadyUsed" },
    ]);
    const metrics = await opened.facilitator.metrics.registry.metrics();
    expect(metrics).to.include('x402_outcomes_total{route="settle",network="cronos-testnet",outcome="settled",dialect="x402v2"} 1');
  });

  const cases: RefusalCase[] = [
    { name: "a payload that is not an exact EVM payload", code: "unsupported_payload_type" },
    { name: "another scheme", code: "invalid_exact_evm_scheme", cronos: (r) => ({ ...r, scheme: "upto" }), v2: (r) => ({ ...r, scheme: "upto" }) },
    {
      name: "a network not configured here",
      code: "invalid_exact_evm_network_mismatch",
      cronos: (r) => ({ ...r, network: "cronos-mainnet" }),
      v2: (r) => ({ ...r, network: "eip155:25" }),
    },
    { name: "another token", code: "invalid_exact_evm_eip3009_not_supported", cronos: (r) => ({ ...r, asset: OTHER_TOKEN }), v2: (r) => ({ ...r, asset: OTHER_TOKEN }) },
    {
      name: "another amount",
      code: "invalid_exact_evm_payload_authorization_value_mismatch",
      cronos: (r) => ({ ...r, maxAmountRequired: "2000000" }),
      v2: (r) => ({ ...r, amount: "2000000" }),
    },
    {
      name: "another recipient",
      code: "invalid_exact_evm_recipient_mismatch",
      cronos: (r) => ({ ...r, payTo: privateKeyToAccount(HARDHAT_KEYS.buyer2).address }),
      v2: (r) => ({ ...r, payTo: privateKeyToAccount(HARDHAT_KEYS.buyer2).address }),
    },
    { name: "a signature over another chain", code: "invalid_exact_evm_signature", options: () => ({ chainId: 1 }) },
    { name: "an authorization not yet valid", code: "invalid_exact_evm_payload_authorization_valid_after", options: (_o, now) => ({ validAfter: now + 600n }) },
    { name: "an expired authorization", code: "invalid_exact_evm_payload_authorization_valid_before", options: (_o, now) => ({ validBefore: now + 3n }) },
    {
      name: "a cancelled nonce",
      code: "invalid_exact_evm_nonce_already_used",
      before: (o, made) => cancelAuthorization(o, made.message.nonce),
    },
    {
      name: "a payer without the funds",
      code: "invalid_exact_evm_insufficient_balance",
      options: () => ({ amount: 10n ** 15n }),
    },
  ];

  for (const refusal of cases) {
    it(`refuses ${refusal.name} with ${refusal.code} and the Cronos dialect's text, on verify and settle alike`, async () => {
      const now = (await opened.chain.publicClient.getBlock()).timestamp;
      const made = await makePayment(opened.chain, refusal.options?.(opened, now));
      await refusal.before?.(opened, made);
      const cronos = { ...made.body, paymentRequirements: (refusal.cronos ?? ((r) => r))(made.body.paymentRequirements) };
      const v2: V2Body = { ...v2BodyOf(made), paymentRequirements: (refusal.v2 ?? ((r) => r))(v2BodyOf(made).paymentRequirements) as V2Body["paymentRequirements"] };
      if (refusal.code === "unsupported_payload_type") {
        cronos.paymentHeader = Buffer.from(JSON.stringify({ x402Version: 1, scheme: "exact", network: "cronos-testnet" })).toString("base64");
        v2.paymentPayload = { ...v2.paymentPayload, payload: { signature: made.signature } } as V2Body["paymentPayload"];
      }
      const payer = refusal.code === "unsupported_payload_type" ? {} : { payer: made.payer.address };
      const balance = await opened.chain.contract.read.balanceOf([made.payer.address]);

      const cronosVerify = await post(opened, "verify", cronos);
      expect(cronosVerify.status).to.equal(200);
      expect(cronosVerify.body.isValid).to.equal(false);
      const v2Verify = await post(opened, "verify", v2);
      const expectedText = refusal.code === "unsupported_payload_type" ? "Invalid paymentPayload: payload.authorization is required" : cronosVerify.body.invalidReason;
      expect(v2Verify).to.deep.equal({ status: 200, body: { isValid: false, invalidReason: refusal.code, invalidMessage: expectedText, ...payer } });

      const cronosSettle = await post(opened, "settle", cronos);
      expect(cronosSettle.body.event).to.equal("payment.failed");
      const v2Settle = await post(opened, "settle", v2);
      const settleText = refusal.code === "unsupported_payload_type" ? expectedText : cronosSettle.body.error;
      expect(v2Settle).to.deep.equal({
        status: 200,
        body: { success: false, errorReason: refusal.code, errorMessage: settleText, ...payer, transaction: "", network: v2.paymentRequirements.network },
      });
      expect(await opened.chain.contract.read.balanceOf([made.payer.address])).to.equal(balance);
    });
  }

  describe("400 JSON naming the problem for an unknown version or a body that mixes the dialects", () => {
    const invalid = (route: "verify" | "settle", text: string, dialect: "cronos" | "x402v2", network: string) => {
      if (dialect === "x402v2") {
        return route === "verify"
          ? { isValid: false, invalidReason: "invalid_request", invalidMessage: text }
          : { success: false, errorReason: "invalid_request", errorMessage: text, transaction: "", network };
      }
      return route === "verify" ? { isValid: false, invalidReason: text } : { x402Version: 1, event: "payment.failed", network, error: text };
    };

    for (const route of ["verify", "settle"] as const) {
      it(`answers ${route} 400 in the shape of the dialect the body names`, async () => {
        const made = await makePayment(opened.chain);
        const v2 = v2BodyOf(made);
        const cases: Array<{ body: object; header?: string; dialect: "cronos" | "x402v2"; network: string; text: string }> = [
          {
            body: { ...made.body, x402Version: 2 },
            dialect: "x402v2",
            network: "cronos-testnet",
            text: "Invalid request: paymentHeader is the Cronos dialect's field (x402Version 1): x402Version 2 sends a paymentPayload object",
          },
          {
            body: { ...made.body, paymentRequirements: { ...made.body.paymentRequirements, network: "eip155:338" } },
            dialect: "cronos",
            network: "eip155:338",
            text: "Invalid request: paymentRequirements.network eip155:338 is an x402 v2 (CAIP-2) network: the Cronos dialect (x402Version 1) names it cronos-testnet",
          },
          {
            body: { ...v2, x402Version: 1 },
            dialect: "cronos",
            network: "eip155:338",
            text: "Invalid request: paymentPayload is x402 v2's field: the Cronos dialect (x402Version 1) sends a paymentHeader string",
          },
          {
            body: { ...v2, paymentRequirements: { ...v2.paymentRequirements, network: "cronos-testnet" } },
            dialect: "x402v2",
            network: "cronos-testnet",
            text: "Invalid request: paymentRequirements.network cronos-testnet is a Cronos-dialect network name (x402Version 1): x402Version 2 names it eip155:338",
          },
          {
            body: { ...v2, paymentPayload: { ...v2.paymentPayload, accepted: { ...v2.paymentPayload.accepted, network: "cronos" } } },
            dialect: "x402v2",
            network: "eip155:338",
            text: "Invalid request: paymentPayload.accepted.network cronos is a Cronos-dialect network name (x402Version 1): x402Version 2 names it eip155:25",
          },
          {
            body: { ...v2, paymentRequirements: { ...made.body.paymentRequirements, network: "eip155:338" } },
            dialect: "x402v2",
            network: "eip155:338",
            text: "Invalid request: paymentRequirements.maxAmountRequired is the Cronos dialect's field (x402Version 1): x402Version 2 names it amount",
          },
          {
            body: v2,
            header: "1",
            dialect: "x402v2",
            network: "eip155:338",
            text: "Invalid request: the X402-Version header says 1 (the Cronos dialect) but the body is x402Version 2",
          },
          { body: v2, header: "3", dialect: "x402v2", network: "eip155:338", text: "Unsupported x402Version: 3" },
          { body: { ...v2, x402Version: 3 }, dialect: "x402v2", network: "eip155:338", text: "Unsupported x402Version: 3" },
          { body: { ...v2, paymentPayload: "abc" }, dialect: "x402v2", network: "eip155:338", text: "Invalid request: paymentPayload must be an object" },
          {
            body: { ...v2, paymentRequirements: { ...v2.paymentRequirements, amount: 5 } },
            dialect: "x402v2",
            network: "eip155:338",
            text: "Invalid request: paymentRequirements.amount must be a decimal string",
          },
        ];
        for (const { body, header, dialect, network, text } of cases) {
          const call = request(opened.app).post(`/v2/x402/${route}`);
          const response = await (header ? call.set("X402-Version", header) : call).send(body);
          expect(response.status, text).to.equal(400);
          const answer = dialect === "cronos" && route === "settle" ? withoutTimestamp(response.body) : response.body;
          expect(answer, text).to.deep.equal(invalid(route, text, dialect, network));
        }
        expect(records.every((record) => record.status === 400 && record.code === "invalid_request")).to.equal(true);
        expect(records.map((record) => record.dialect)).to.deep.equal(["x402v2", "cronos", "cronos", "x402v2", "x402v2", "x402v2", "x402v2", "x402v2", "x402v2", "x402v2", "x402v2"]);
      });
    }
  });

  it("answers verify 500 and settle 503 in v2 shapes when the chain cannot be read", async () => {
    const made = await makePayment(opened.chain);
    const { app, fail } = await openFlakyFacilitator(opened);
    fail();
    const text = "Service unavailable: cannot read cronos-testnet state";
    const verify = await request(app).post("/v2/x402/verify").send(v2BodyOf(made));
    expect({ status: verify.status, body: verify.body }).to.deep.equal({
      status: 500,
      body: { isValid: false, invalidReason: "facilitator_unavailable", invalidMessage: text },
    });
    const settle = await request(app).post("/v2/x402/settle").send(v2BodyOf(made));
    expect({ status: settle.status, body: settle.body }).to.deep.equal({
      status: 503,
      body: { success: false, errorReason: "facilitator_unavailable", errorMessage: text, transaction: "", network: "eip155:338" },
    });
  });
});
