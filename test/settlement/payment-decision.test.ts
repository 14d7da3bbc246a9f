import { expect } from "chai";
import request from "supertest";
import type { Hex } from "viem";
import { SettleError } from "../../src/protocol/reasons.js";
import { EvmReason } from "../../src/protocol/x402v2.js";
import { makePayment, openFacilitator, recordingLogger, sendAuthorization, v2BodyOf } from "../helpers/facilitator.js";
import { openMemoryLedger, switchableLedger } from "../helpers/ledger.js";
import { setAutomine } from "../helpers/mining.js";
import { expectFailed, FRONT_RUN, RELAYER, relayerNonce, revertedGas, settle } from "../helpers/settle.js";
import { withoutTimestamp } from "../helpers/time.js";
import { waitUntil } from "../helpers/wait.js";

// "Paid" means the chain moved the seller's money: a payer who spends its own nonce first with another
// authorization (a substitute: 1 unit to itself) gets no settled answer, on a real local chain (EDR).

type Opened = Awaited<ReturnType<typeof openFacilitator>>;
type Made = Awaited<ReturnType<typeof makePayment>>;

/** The payer signs A2 under A1's nonce (1 unit to itself) and sends it itself, with a tip that puts it first. */
async function sendSubstitute(opened: Opened, first: Made): Promise<{ hash: Hex; substitute: Made }> {
  const substitute = await makePayment(opened.chain, { nonce: first.message.nonce, payTo: opened.buyer.address, amount: 1n });
  return { hash: await sendAuthorization(opened.chain, substitute, FRONT_RUN), substitute };
}

/**
 * Starts a settle of `payment` with automine off; once the relayer's transaction is in the mempool the
 * payer's substitute goes in with a higher tip, `meanwhile` runs, and one block mines both: the
 * substitute spends the nonce, the relayer's transaction reverts. Returns the answer and both hashes.
 */
async function substituteMinedFirst(opened: Opened, payment: Made, dialect: "cronos" | "x402v2", meanwhile: () => void = () => {}) {
  const { chain } = opened;
  const nonce = await relayerNonce(opened);
  await setAutomine(opened.chain.connection.provider, false);
  try {
    const body = dialect === "cronos" ? payment.body : v2BodyOf(payment);
    const answering = request(opened.app).post("/v2/x402/settle").send(body).then((r) => r);
    expect(await waitUntil(async () => (await relayerNonce(opened)) === nonce + 1, 10_000, 10), "the settlement reached the mempool").to.equal(true);
    const { hash: substituteHash } = await sendSubstitute(opened, payment);
    meanwhile();
    await chain.networkHelpers.mine();
    const answer = await answering;
    const substitute = await chain.publicClient.getTransactionReceipt({ hash: substituteHash });
    expect(substitute.status).to.equal("success");
    const block = await chain.publicClient.getBlock({ blockNumber: substitute.blockNumber, includeTransactions: true });
    const ours = block.transactions.find((tx) => tx.from.toLowerCase() === RELAYER.toLowerCase())!;
    const reverted = await chain.publicClient.getTransactionReceipt({ hash: ours.hash });
    expect(reverted.status).to.equal("reverted");
    expect(reverted.transactionIndex).to.be.above(substitute.transactionIndex);
    return { answer, substituteHash, ourHash: ours.hash, reverted };
  } finally {
    await setAutomine(opened.chain.connection.provider, true);
  }
}

const lookup = (opened: Opened, payment: Made) =>
  request(opened.app).get("/v2/x402/settlements").query({ network: "cronos-testnet", from: payment.message.from, nonce: payment.message.nonce });

/** The payer's next settle (a fresh authorization) is refused without anything sent or simulated: the revert penalty. */
async function expectPenalised(opened: Opened): Promise<void> {
  const nonce = await relayerNonce(opened);
  opened.rpc.reset();
  expectFailed(await settle(opened, (await makePayment(opened.chain)).body), SettleError.failedOnChain);
  expect(await relayerNonce(opened)).to.equal(nonce);
  expect(opened.rpc.count("eth_estimateGas")).to.equal(0);
}

describe("settlement: paid only by this payment's transfer", function () {
  this.timeout(60_000);

  for (const dialect of ["cronos", "x402v2"] as const) {
    it(`a substitute under the same nonce (1 unit to the payer itself) mined before the relayer's transaction: Authorization already used naming no transaction (${dialect}), the seller unpaid, the lookup failed, the payer penalised`, async () => {
      const { logger, lines } = recordingLogger();
      const opened = await openFacilitator("cronos-testnet", {}, { logger });
      try {
        const { chain } = opened;
        const payment = await makePayment(chain, { amount: 700n });
        const [sellerBefore, payerBefore] = await Promise.all([chain.contract.read.balanceOf([payment.payTo]), chain.contract.read.balanceOf([opened.buyer.address])]);

        const { answer, ourHash, reverted } = await substituteMinedFirst(opened, payment, dialect);
        expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
        if (dialect === "cronos") {
          expect(withoutTimestamp(answer.body)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: SettleError.alreadyUsed });
        } else {
          expect(answer.body).to.deep.equal({
            success: false,
            errorReason: EvmReason.nonceAlreadyUsed,
            errorMessage: SettleError.alreadyUsed,
            payer: payment.message.from,
            transaction: "",
            network: "eip155:338",
          });
        }
        // The chain's truth: the seller got nothing, the payer paid itself (its balance unchanged).
        expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(sellerBefore);
        expect(await chain.contract.read.balanceOf([opened.buyer.address])).to.equal(payerBefore);
        expect(await revertedGas(opened)).to.equal(Number(reverted.gasUsed));
        expect(lines.filter((l) => l.message === "settlement failed: the authorization was spent by another transaction").map((l) => l.fields.cause)).to.deep.equal(["spentElsewhere"]);

        // The lookup: failed, its hash ours (reverted), never the substitute's.
        expect((await lookup(opened, payment)).body).to.deep.include({ status: "failed", error: SettleError.alreadyUsed, txHash: ourHash, transactions: [ourHash] });
        // The retry of A1: already used, and still no transaction named as its payment.
        expectFailed(await settle(opened, payment.body), SettleError.alreadyUsed);
        await expectPenalised(opened);
        expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(sellerBefore);
      } finally {
        await opened.facilitator.close();
      }
    });
  }

  it("the Authorization already used answer names a transaction only when it is this very payment's transfer: the substitute's own authorization gets its hash, A1 none", async () => {
    const opened = await openFacilitator();
    try {
      const { chain } = opened;
      const payment = await makePayment(chain, { amount: 700n });
      const { hash, substitute } = await sendSubstitute(opened, payment);
      expect((await chain.publicClient.getTransactionReceipt({ hash })).status).to.equal("success");
      // A1, after the nonce was spent by A2: verify says used; nothing of A1's was paid.
      expectFailed(await settle(opened, payment.body), SettleError.alreadyUsed);
      // A2 itself (1 unit to the payer), presented as a payment to its own payee: its transfer is named.
      expectFailed(await settle(opened, substitute.body), SettleError.alreadyUsed, { txHash: hash });
    } finally {
      await opened.facilitator.close();
    }
  });

  it("settle timed out while the relayer's transaction waits; the substitute is mined then: the reconciler fails the row in its next round (Authorization already used), the payer penalised, the seller unpaid", async () => {
    const opened = await openFacilitator("cronos-testnet", { SETTLE_TIMEOUT_SECONDS: "1", RECONCILE_INTERVAL_MS: "200" });
    try {
      const { chain } = opened;
      const payment = await makePayment(chain, { amount: 700n });
      const sellerBefore = await chain.contract.read.balanceOf([payment.payTo]);
      const nonce = await relayerNonce(opened);
      await setAutomine(opened.chain.connection.provider, false);
      let ourHash: Hex;
      try {
        const answer = await settle(opened, payment.body);
        expect(await relayerNonce(opened)).to.equal(nonce + 1);
        // Not mined by the deadline, and nothing spent the nonce yet: the pending answer, with our hash.
        ourHash = answer.txHash!;
        expectFailed(answer, SettleError.failedOnChain, { txHash: ourHash });
        expect((await lookup(opened, payment)).body.status).to.equal("pending");
        await sendSubstitute(opened, payment);
        await chain.networkHelpers.mine();
      } finally {
        await setAutomine(opened.chain.connection.provider, true);
      }
      expect((await chain.publicClient.getTransactionReceipt({ hash: ourHash })).status).to.equal("reverted");
      expect(await waitUntil(async () => (await lookup(opened, payment)).body.status !== "pending", 10_000, 50), "the reconciler decided the row").to.equal(true);
      expect((await lookup(opened, payment)).body).to.deep.include({ status: "failed", error: SettleError.alreadyUsed, txHash: ourHash });
      expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(sellerBefore);
      await expectPenalised(opened);
    } finally {
      await opened.facilitator.close();
    }
  });

  it("the token's logs cannot be read when the substitute makes the relayer's transaction revert: 503 with no verdict, the lookup pending, nobody penalised; once they can, the row fails in the reconciler's next round and the payer is penalised", async () => {
    const switchable = switchableLedger(openMemoryLedger());
    const opened = await openFacilitator("cronos-testnet", { RECONCILE_INTERVAL_MS: "200" }, { ledger: switchable.ledger });
    try {
      const payment = await makePayment(opened.chain, { amount: 700n });
      const sellerBefore = await opened.chain.contract.read.balanceOf([payment.payTo]);
      const { answer, ourHash } = await substituteMinedFirst(opened, payment, "cronos", () => opened.rpc.failing.add("eth_getLogs"));
      expect(answer.status, JSON.stringify(answer.body)).to.equal(503);
      expect(answer.body.event).to.equal(undefined);
      expect(answer.body.error).to.match(new RegExp(`^Service unavailable: settlement transaction ${ourHash} on cronos-testnet reverted and it is not known yet whether the authorization was paid elsewhere \\(the authorization is used, and the token's logs cannot be read`));
      // Rounds go by while the logs stay unreadable (two more reads of the transaction's receipt, one a round):
      // never failed, never settled.
      const receiptReads = () => opened.rpc.calls.filter((call) => call.method === "eth_getTransactionReceipt" && call.params[0] === ourHash).length;
      const readsAtAnswer = receiptReads();
      await waitUntil("two reconciler rounds over the row", () => receiptReads() >= readsAtAnswer + 2);
      expect((await lookup(opened, payment)).body).to.deep.include({ status: "pending", txHash: ourHash });
      // Not penalised on a guess: another payment of the payer's goes through.
      expect((await settle(opened, (await makePayment(opened.chain)).body)).event).to.equal("payment.settled");

      opened.rpc.failing.delete("eth_getLogs");
      expect(await waitUntil(async () => (await lookup(opened, payment)).body.status !== "pending", 10_000, 50), "the reconciler decided the row").to.equal(true);
      expect((await lookup(opened, payment)).body).to.deep.include({ status: "failed", error: SettleError.alreadyUsed, txHash: ourHash });
      expect(await opened.chain.contract.read.balanceOf([payment.payTo])).to.equal(sellerBefore + 1_000_000n);
      await expectPenalised(opened);
    } finally {
      await opened.facilitator.close();
      await switchable.ledger.close();
    }
  });
});
