import { expect } from "chai";
import request from "supertest";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { HARDHAT_KEYS, makePayment, openFacilitator } from "../helpers/facilitator.js";
import { SPEC_VERIFY } from "../helpers/spec-texts.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

const OTHER_TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
const SOMEONE_ELSE = privateKeyToAccount(HARDHAT_KEYS.buyer2).address;

/**
 * The verify checks in the spec's order (decisions.md, Verify). For each adjacent pair (k, k+1) a
 * request fails both, and the answer must be k's reason.
 */
describe("facilitator verify: checks in the spec's order, every adjacent pair", () => {
  let opened: Opened;
  before(async () => {
    opened = await openFacilitator();
  });

  async function verify(body: object) {
    const response = await request(opened.app).post("/v2/x402/verify").set("X402-Version", "1").send(body);
    expect(response.status, JSON.stringify(response.body)).to.equal(200);
    return response.body as { isValid: boolean; invalidReason: string | null };
  }

  const now = async () => (await opened.chain.publicClient.getBlock({ blockTag: "latest" })).timestamp;
  const refused = (invalidReason: string) => ({ isValid: false, invalidReason });

  /** Asserts that `both` (failing k and k+1) answers k's reason, and `secondOnly` (k fixed) k+1's: both checks really fail. */
  async function expectOrder(both: object, first: string, secondOnly: object, second: string) {
    expect(await verify(both)).to.deep.equal(refused(first));
    expect(await verify(secondOnly)).to.deep.equal(refused(second));
  }

  it("1 header before 2 scheme: a header that is not base64, with requirements of another scheme", async () => {
    const { body } = await makePayment(opened.chain);
    const upto = { ...body.paymentRequirements, scheme: "upto" };
    await expectOrder({ ...body, paymentHeader: "%%%", paymentRequirements: upto }, SPEC_VERIFY.invalidBase64, { ...body, paymentRequirements: upto }, SPEC_VERIFY.unsupportedScheme("upto"));
  });

  it("2 scheme before 3 network: another scheme on an unknown network", async () => {
    const { body } = await makePayment(opened.chain);
    const elsewhere = { ...body.paymentRequirements, network: "base-sepolia" };
    await expectOrder(
      { ...body, paymentRequirements: { ...elsewhere, scheme: "upto" } },
      SPEC_VERIFY.unsupportedScheme("upto"),
      { ...body, paymentRequirements: elsewhere },
      SPEC_VERIFY.unsupportedNetwork("base-sepolia"),
    );
  });

  it("3 network before 4 asset: an unknown network and another token", async () => {
    const { body } = await makePayment(opened.chain);
    const otherToken = { ...body.paymentRequirements, asset: OTHER_TOKEN };
    await expectOrder(
      { ...body, paymentRequirements: { ...otherToken, network: "base-sepolia" } },
      SPEC_VERIFY.unsupportedNetwork("base-sepolia"),
      { ...body, paymentRequirements: otherToken },
      SPEC_VERIFY.unsupportedAsset(OTHER_TOKEN),
    );
  });

  it("4 asset before 4 amount: another token and an amount that is not the required one", async () => {
    const { body } = await makePayment(opened.chain);
    const otherAmount = { ...body.paymentRequirements, maxAmountRequired: "2000000" };
    await expectOrder(
      { ...body, paymentRequirements: { ...otherAmount, asset: OTHER_TOKEN } },
      SPEC_VERIFY.unsupportedAsset(OTHER_TOKEN),
      { ...body, paymentRequirements: otherAmount },
      SPEC_VERIFY.invalidAmount("1000000"),
    );
  });

  it("4 amount before 5 recipient: not the required amount, paid to someone else", async () => {
    const { body } = await makePayment(opened.chain);
    const otherPayee = { ...body.paymentRequirements, payTo: SOMEONE_ELSE };
    await expectOrder(
      { ...body, paymentRequirements: { ...otherPayee, maxAmountRequired: "2000000" } },
      SPEC_VERIFY.invalidAmount("1000000"),
      { ...body, paymentRequirements: otherPayee },
      SPEC_VERIFY.recipientMismatch,
    );
  });

  it("5 recipient before 6 signature: paid to someone else, signed over another value", async () => {
    const { body } = await makePayment(opened.chain, { signedValue: 5n });
    await expectOrder({ ...body, paymentRequirements: { ...body.paymentRequirements, payTo: SOMEONE_ELSE } }, SPEC_VERIFY.recipientMismatch, body, SPEC_VERIFY.invalidSignature);
  });

  it("6 signature before 7 not yet valid: signed over another value, valid only later", async () => {
    const validAfter = (await now()) + 600n;
    const both = await makePayment(opened.chain, { signedValue: 5n, validAfter });
    const secondOnly = await makePayment(opened.chain, { validAfter });
    await expectOrder(both.body, SPEC_VERIFY.invalidSignature, secondOnly.body, SPEC_VERIFY.notYetValid);
  });

  it("7 not yet valid before 7 expired: a window that opens later than it closes", async () => {
    const t = await now();
    const both = await makePayment(opened.chain, { validAfter: t + 600n, validBefore: t + 1n });
    const secondOnly = await makePayment(opened.chain, { validBefore: t + 1n });
    await expectOrder(both.body, SPEC_VERIFY.notYetValid, secondOnly.body, SPEC_VERIFY.expired);
  });

  it("7 expired before 8 already used: a settled authorization whose window has passed", async () => {
    const { body } = await makePayment(opened.chain, { validBefore: (await now()) + 60n });
    expect((await request(opened.app).post("/v2/x402/settle").send(body)).body.event).to.equal("payment.settled");
    expect(await verify(body)).to.deep.equal(refused(SPEC_VERIFY.alreadyUsed));
    await opened.chain.networkHelpers.time.increase(120);
    expect(await verify(body)).to.deep.equal(refused(SPEC_VERIFY.expired));
  });

  it("8 already used before 8 balance: a settled authorization for the payer's whole balance (now 0)", async () => {
    const payer = privateKeyToAccount(generatePrivateKey());
    await opened.chain.contract.write.mint([payer.address, 1_000_000n]);
    const { body } = await makePayment(opened.chain, { payer, amount: 1_000_000n });
    expect((await request(opened.app).post("/v2/x402/settle").send(body)).body.event).to.equal("payment.settled");
    expect(await opened.chain.contract.read.balanceOf([payer.address])).to.equal(0n);
    const unused = await makePayment(opened.chain, { payer, amount: 1_000_000n });
    await expectOrder(body, SPEC_VERIFY.alreadyUsed, unused.body, SPEC_VERIFY.insufficientBalance);
  });
});
