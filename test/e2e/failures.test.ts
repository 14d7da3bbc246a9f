import { expect } from "chai";
import express from "express";
import type { Address, Hex } from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { createPaymentHeader, wrapFetchWithPayment } from "../../src/buyer/index.js";
import type { HarnessControl } from "../../src/harness/control/spec.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { decodeBase64Json, encodeBase64Json } from "../../src/protocol/header.js";
import { paymentRequirements, requirePayment, SellerError, type SellerLogger } from "../../src/seller/index.js";
import { chainTime, rpcClient, tokenBalances } from "../helpers/chain.js";
import { FAILURE_ROWS, type FailureRow } from "../helpers/failures.js";
import { listen, recordingFetch, type Listening } from "../helpers/http.js";
import { rpc } from "../helpers/rpc.js";
import { paymentRequiredBody, STACK_OPTIONS, startTestStack } from "../helpers/seller.js";
import { waitUntil } from "../helpers/wait.js";

// docs/failures.md's table "every failure on demand", row by row: each failure made to happen for real with the
// harness (or by the buyer signing what the row says), through the kit's own seller (requirePayment) and
// buyer (wrapFetchWithPayment, createPaymentHeader); the buyer's answer asserted exactly, and the money.

const PRICE = 10_000n;
const FOREIGN_TOKEN: Address = "0x000000000000000000000000000000000000bEEF";

describe("e2e: every failure on demand, as the table of docs/failures.md has it (the kit's seller and buyer, the harness)", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  let harness: HarnessControl;
  let seller: Listening;
  const logged: unknown[] = [];
  const logger: SellerLogger = { error: (fields) => void logged.push(fields) };
  const testnet = () => stack.networks["cronos-testnet"]!;
  const requirements = () => paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE, resource: "/report" });
  const foreignRequirements = () => paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE, asset: FOREIGN_TOKEN, resource: "/foreign" });
  const url = (path = "/report") => `${seller.url}${path}`;
  const buyer = (index = 0): PrivateKeyAccount => privateKeyToAccount(testnet().buyers[index]!.privateKey);
  const pay = (account = buyer(), payFetch: typeof fetch = fetch) => wrapFetchWithPayment(payFetch, { signer: account, maxAmount: PRICE })(url());
  const send = (header: string, path = "/report") => fetch(url(path), { headers: { "X-PAYMENT": header } });
  const balances = (account = buyer()) => tokenBalances(testnet().rpcUrl, testnet().token, [account.address, stack.seller]);

  /** Asserts the buyer's answer is the row's, exactly; nothing served unless the row says 200. */
  async function expectRow(response: Response, row: FailureRow, options: { path?: "/report" | "/foreign"; busySeconds?: number } = {}) {
    const text = await response.text();
    expect(response.status, text).to.equal(row.status);
    const body = JSON.parse(text) as Record<string, unknown>;
    if (row.status === 200) {
      expect(body).to.deep.include({ report: "sunny" });
      expect(response.headers.get("X-PAYMENT-RESPONSE")).to.be.a("string");
      return body.payment as { txHash: Hex };
    }
    expect(response.headers.get("X-PAYMENT-RESPONSE")).to.equal(null);
    if (row.status === 402) {
      const offered = options.path === "/foreign" ? foreignRequirements() : requirements();
      expect(body).to.deep.equal(paymentRequiredBody(offered, row.error!, row.reason));
    } else {
      expect(body).to.deep.equal({ error: row.error, details: SellerError.tryLater });
    }
    if (row.retryAfter === "2") expect(response.headers.get("retry-after")).to.equal("2");
    if (row.retryAfter === "busy") expect(Number(response.headers.get("retry-after"))).to.be.within(options.busySeconds! - 1, options.busySeconds!);
    return undefined;
  }

  /** The facilitator's record of an X-PAYMENT's authorization: pending, settled or failed. */
  async function lookup(header: string): Promise<{ status: string; txHash: Hex } | undefined> {
    const { from, nonce } = (decodeBase64Json(header) as { ok: true; json: { payload: { from: string; nonce: string } } }).json.payload;
    const response = await fetch(`${stack.facilitatorUrl}/v2/x402/settlements?network=cronos-testnet&from=${from}&nonce=${nonce}`);
    return response.status === 200 ? ((await response.json()) as { status: string; txHash: Hex }) : undefined;
  }

  /**
   * Resolves once the relayer's transaction waits in the pool (blocks stopped): its pending nonce is past its
   * committed one (a Cronos node has no pending block; its pending count is the pool's first page).
   */
  const inThePool = () =>
    waitUntil(async () => {
      const [pending, latest] = await Promise.all(["pending", "latest"].map((tag) => rpc<Hex>(testnet().rpcUrl, "eth_getTransactionCount", [stack.relayer, tag])));
      return pending !== latest;
    }, 10_000, 20);

  before(async () => {
    // Short time-outs, so the rows that wait for one take seconds: a settle's receipt wait, an RPC answer, the reconciler.
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], env: { SETTLE_TIMEOUT_SECONDS: "3", RPC_TIMEOUT_MS: "1000", RECONCILE_INTERVAL_MS: "200" } });
    harness = stack.harness;
    const app = express();
    const facilitator = { facilitatorUrl: stack.facilitatorUrl, logger };
    app.get("/report", requirePayment(requirements(), facilitator), (_req, res) => void res.json({ report: "sunny" }));
    app.get("/foreign", requirePayment(foreignRequirements(), facilitator), (_req, res) => void res.json({ report: "sunny" }));
    seller = await listen(app);
  });
  after(async () => {
    await seller?.close();
    await stack?.stop();
  });
  afterEach(async () => {
    await harness.reset();
    logged.length = 0;
  });

  it(`${FAILURE_ROWS.paid.what}: 200, the content and the payment; the payee paid once`, async () => {
    const before = await balances();
    const payment = await expectRow(await pay(), FAILURE_ROWS.paid);
    expect(payment!.txHash).to.match(/^0x[0-9a-f]{64}$/);
    expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  describe("spec errors (the buyer's payment, or the route)", () => {
    it(FAILURE_ROWS.noPayment.what, async () => {
      await expectRow(await fetch(url()), FAILURE_ROWS.noPayment);
    });

    it(FAILURE_ROWS.invalidBase64.what, async () => {
      await expectRow(await send("not base64!"), FAILURE_ROWS.invalidBase64);
    });

    it(FAILURE_ROWS.invalidHeader.what, async () => {
      const header = await createPaymentHeader({ signer: buyer(), requirements: requirements() });
      const json = (decodeBase64Json(header) as { ok: true; json: { payload: Record<string, unknown> } }).json;
      delete json.payload.signature;
      await expectRow(await send(encodeBase64Json(json)), FAILURE_ROWS.invalidHeader);
    });

    it(FAILURE_ROWS.unsupportedScheme.what, async () => {
      const header = await createPaymentHeader({ signer: buyer(), requirements: requirements() });
      const json = (decodeBase64Json(header) as { ok: true; json: Record<string, unknown> }).json;
      await expectRow(await send(encodeBase64Json({ ...json, scheme: "upto" })), FAILURE_ROWS.unsupportedScheme);
    });

    it(FAILURE_ROWS.unsupportedNetwork.what, async () => {
      const mainnet = paymentRequirements({ network: "cronos-mainnet", payTo: stack.seller, amount: PRICE });
      await expectRow(await send(await createPaymentHeader({ signer: buyer(), requirements: mainnet })), FAILURE_ROWS.unsupportedNetwork);
    });

    it(FAILURE_ROWS.unsupportedAsset.what, async () => {
      const before = await balances();
      const response = await wrapFetchWithPayment(fetch, { signer: buyer(), maxAmount: PRICE, assets: [FOREIGN_TOKEN] })(url("/foreign"));
      await expectRow(response, FAILURE_ROWS.unsupportedAsset, { path: "/foreign" });
      expect(await balances()).to.deep.equal(before);
    });

    it(FAILURE_ROWS.invalidAmount.what, async () => {
      const cheaper = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: 5_000n });
      await expectRow(await send(await createPaymentHeader({ signer: buyer(), requirements: cheaper })), FAILURE_ROWS.invalidAmount);
    });

    it(FAILURE_ROWS.recipientMismatch.what, async () => {
      const elsewhere = paymentRequirements({ network: "cronos-testnet", payTo: buyer(1).address, amount: PRICE });
      await expectRow(await send(await createPaymentHeader({ signer: buyer(), requirements: elsewhere })), FAILURE_ROWS.recipientMismatch);
    });

    it(FAILURE_ROWS.invalidSignature.what, async () => {
      const response = await wrapFetchWithPayment(fetch, { signer: buyer(), maxAmount: PRICE, domain: { name: "Bridged USDC (Stargate)", version: "9" } })(url());
      await expectRow(response, FAILURE_ROWS.invalidSignature);
    });

    it(FAILURE_ROWS.notYetValid.what, async () => {
      const now = await chainTime(testnet().rpcUrl);
      await expectRow(await send(await createPaymentHeader({ signer: buyer(), requirements: requirements(), validAfter: now + 3_600n })), FAILURE_ROWS.notYetValid);
    });

    it(FAILURE_ROWS.expired.what, async () => {
      const now = await chainTime(testnet().rpcUrl);
      const header = await createPaymentHeader({ signer: buyer(), requirements: requirements(), validBefore: now + 60n });
      await harness.advanceTime(120);
      await expectRow(await send(header), FAILURE_ROWS.expired);
    });

    it(FAILURE_ROWS.alreadyUsed.what, async () => {
      const header = await createPaymentHeader({ signer: buyer(), requirements: requirements() });
      await harness.fault({ kind: "authorization", action: "cancel", payment: header });
      await expectRow(await send(header), FAILURE_ROWS.alreadyUsed);
    });

    it(FAILURE_ROWS.noBalance.what, async () => {
      await harness.fault({ kind: "balance", address: buyer().address, amount: 0 });
      await expectRow(await pay(), FAILURE_ROWS.noBalance);
    });
  });

  describe("payer and token faults between verify and settle (after-verify)", () => {
    it(`${FAILURE_ROWS.balanceVanished.what}: nothing served, nothing paid`, async () => {
      const before = await balances();
      await harness.fault({ kind: "balance", address: buyer().address, amount: 0, trigger: "after-verify" });
      await expectRow(await pay(), FAILURE_ROWS.balanceVanished);
      expect((await balances())[1]).to.equal(before[1]);
    });

    it(FAILURE_ROWS.expiredBetween.what, async () => {
      const now = await chainTime(testnet().rpcUrl);
      const header = await createPaymentHeader({ signer: buyer(), requirements: requirements(), validBefore: now + 60n });
      await harness.fault({ kind: "time", seconds: 120, trigger: "after-verify" });
      await expectRow(await send(header), FAILURE_ROWS.expiredBetween);
    });

    it(FAILURE_ROWS.cancelledBetween.what, async () => {
      const before = await balances();
      await harness.fault({ kind: "authorization", action: "cancel", trigger: "after-verify" });
      await expectRow(await pay(), FAILURE_ROWS.cancelledBetween);
      expect(await balances()).to.deep.equal(before);
    });

    it(`${FAILURE_ROWS.usedBetween.what}: the payee is paid once (by that transaction), the buyer is not served`, async () => {
      const before = await balances();
      await harness.fault({ kind: "authorization", action: "use", trigger: "after-verify" });
      await expectRow(await pay(), FAILURE_ROWS.usedBetween);
      expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });

    it(`${FAILURE_ROWS.paused.what} (before or during the payment: verify does not read the pause)`, async () => {
      const before = await balances();
      await harness.fault({ kind: "pause" });
      await expectRow(await pay(), FAILURE_ROWS.paused);
      expect(await balances()).to.deep.equal(before);
    });

    it(FAILURE_ROWS.payerBlacklisted.what, async () => {
      await harness.fault({ kind: "blacklist", address: buyer().address });
      await expectRow(await pay(), FAILURE_ROWS.payerBlacklisted);
    });

    it(FAILURE_ROWS.payeeBlacklisted.what, async () => {
      await harness.fault({ kind: "blacklist", address: stack.seller, trigger: "after-verify", payer: buyer().address });
      await expectRow(await pay(), FAILURE_ROWS.payeeBlacklisted);
    });
  });

  describe("the facilitator's RPC", () => {
    it(FAILURE_ROWS.rpcDown.what, async () => {
      await harness.fault({ kind: "rpc", mode: "refuse" });
      await expectRow(await pay(), FAILURE_ROWS.rpcDown);
      expect(logged).to.have.length(1);
    });

    it(`${FAILURE_ROWS.rpcDownAtSettle.what}: nothing sent; the buyer may retry after Retry-After`, async () => {
      const nonce = await rpcClient(testnet().rpcUrl).getTransactionCount({ address: stack.relayer, blockTag: "pending" });
      await harness.fault({ kind: "rpc", mode: "refuse", trigger: "after-verify" });
      await expectRow(await pay(), FAILURE_ROWS.rpcDownAtSettle);
      expect(await rpcClient(testnet().rpcUrl).getTransactionCount({ address: stack.relayer, blockTag: "pending" })).to.equal(nonce);
    });

    it(FAILURE_ROWS.rpcSlow.what, async () => {
      await harness.fault({ kind: "rpc", mode: "delay", delayMs: 100 });
      await expectRow(await pay(), FAILURE_ROWS.rpcSlow);
    });

    it(`${FAILURE_ROWS.rpcLosesBroadcast.what}: the transaction went out, the facilitator finds its receipt`, async () => {
      const before = await balances();
      await harness.fault({ kind: "rpc", mode: "drop", methods: ["eth_sendRawTransaction"], trigger: "after-verify" });
      await expectRow(await pay(), FAILURE_ROWS.rpcLosesBroadcast);
      expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });

    it(FAILURE_ROWS.rpcSilentAtSettle.what, async () => {
      await harness.fault({ kind: "rpc", mode: "drop", trigger: "after-verify", forSeconds: 5 });
      await expectRow(await pay(), FAILURE_ROWS.rpcSilentAtSettle);
    });
  });

  describe("the facilitator", () => {
    it(FAILURE_ROWS.busy.what, async () => {
      await harness.fault({ kind: "busy", forSeconds: 30 });
      await expectRow(await pay(), FAILURE_ROWS.busy, { busySeconds: 30 });
    });

    it(FAILURE_ROWS.busyAtSettle.what, async () => {
      const before = await balances();
      await harness.fault({ kind: "busy", forSeconds: 20, trigger: "after-verify" });
      await expectRow(await pay(), FAILURE_ROWS.busyAtSettle, { busySeconds: 20 });
      expect(await balances()).to.deep.equal(before);
    });

    it(FAILURE_ROWS.down.what, async () => {
      await harness.fault({ kind: "facilitator-down" });
      await expectRow(await pay(), FAILURE_ROWS.down);
    });

    it(`${FAILURE_ROWS.restarted.what}: the new facilitator finishes it from the ledger, and the same X-PAYMENT is then served`, async () => {
      const recorder = recordingFetch();
      const before = await balances();
      await harness.fault({ kind: "blocks", trigger: "after-verify" });
      const paying = pay(buyer(), recorder.fetch);
      expect(await inThePool()).to.equal(true);
      await harness.restartFacilitator();
      await expectRow(await paying, FAILURE_ROWS.restarted);
      await harness.resumeBlocks();
      const header = recorder.paymentHeaders[0]!;
      expect(await waitUntil(async () => (await lookup(header))?.status === "settled", 15_000, 100)).to.equal(true);
      const served = await expectRow(await send(header), FAILURE_ROWS.paid);
      expect(served!.txHash).to.equal((await lookup(header))!.txHash);
      expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });
  });

  describe("blocks", () => {
    it(FAILURE_ROWS.slowBlocks.what, async () => {
      await harness.fault({ kind: "blocks", forSeconds: 1, trigger: "after-verify" });
      await expectRow(await pay(), FAILURE_ROWS.slowBlocks);
    });

    it(`${FAILURE_ROWS.stuck.what}: the settle answers with the hash; once mined, the same X-PAYMENT is served`, async () => {
      const recorder = recordingFetch();
      const before = await balances();
      await harness.fault({ kind: "blocks", trigger: "after-verify" });
      await expectRow(await pay(buyer(), recorder.fetch), FAILURE_ROWS.stuck);
      expect(await balances()).to.deep.equal(before);
      await harness.resumeBlocks();
      const header = recorder.paymentHeaders[0]!;
      expect(await waitUntil(async () => (await lookup(header))?.status === "settled", 15_000, 100)).to.equal(true);
      await expectRow(await send(header), FAILURE_ROWS.paid);
      expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });
  });
});
