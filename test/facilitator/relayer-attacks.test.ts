import { expect } from "chai";
import request from "supertest";
import { parseSignature, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { CANCEL_AUTHORIZATION_TYPES } from "../../src/protocol/eip3009.js";
import { SettleError } from "../../src/protocol/reasons.js";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { HARDHAT_KEYS, makePayment, openFacilitator, recordingLogger, v2BodyOf } from "../helpers/facilitator.js";
import { openMemoryLedger, switchableLedger } from "../helpers/ledger.js";
import { setAutomine } from "../helpers/mining.js";
import { expectFailed, FRONT_RUN, RELAYER, relayerNonce, revertedGas, settle, settleFrontRun, type SettleAnswer } from "../helpers/settle.js";
import { deployFlipWallet, walletPayment } from "../helpers/wallets.js";
import { waitFor, waitUntil, WAIT_MS } from "../helpers/wait.js";

// Reverts the relayer pays for: what a simulation cannot catch, shown on a real local chain (EDR),
// then refused. Automine is off while an attacker's transaction and a pending settlement meet in
// one block; the attacker's higher tip puts its transaction first (EDR orders the mempool by tip).

describe("relayer safety: reverts the relayer would pay for", () => {
  it("five concurrent authorizations, each for the payer's whole balance: one settles, four answer ERC20: transfer amount exceeds balance without sending", async () => {
    const opened = await openFacilitator();
    const payer = privateKeyToAccount(generatePrivateKey());
    const balance = 3_000_000n;
    await opened.chain.contract.write.mint([payer.address, balance]);
    const payTo = opened.seller.address;
    const payments = await Promise.all(Array.from({ length: 5 }, () => makePayment(opened.chain, { payer, amount: balance, payTo })));
    const sellerBefore = await opened.chain.contract.read.balanceOf([payTo]);
    const nonce = await relayerNonce(opened);
    opened.rpc.reset();

    // Automine off: the first settlement waits in the mempool, so every verify sees the whole balance.
    await setAutomine(opened.chain.connection.provider, false);
    const answered: Array<Record<string, unknown>> = [];
    let all: Promise<SettleAnswer[]>;
    try {
      all = Promise.all(payments.map((payment) => settle(opened, payment.body).then((answer) => (answered.push(answer), answer))));
      // Four answers and one transaction in the mempool, before any block: the fifth waits for its receipt.
      const ready = async () => answered.length === 4 && (await relayerNonce(opened)) === nonce + 1;
      expect(await waitUntil(ready, 10_000, 10), "four answers and one transaction before any block").to.equal(true);
      expect(answered).to.have.length(4);
      for (const answer of answered) expectFailed(answer, SettleError.insufficientBalance);
      await opened.chain.networkHelpers.mine();
    } finally {
      await setAutomine(opened.chain.connection.provider, true);
    }
    const answers = await all;
    expect(answers.map((a) => a.event).sort()).to.deep.equal(["payment.failed", "payment.failed", "payment.failed", "payment.failed", "payment.settled"]);
    expect(await opened.chain.contract.read.balanceOf([payer.address])).to.equal(0n);
    expect(await opened.chain.contract.read.balanceOf([payTo])).to.equal(sellerBefore + balance);
    expect(await opened.chain.publicClient.getTransactionCount({ address: RELAYER })).to.equal(nonce + 1);
    // The refusals came from the reservation, before any simulation.
    expect(opened.rpc.count("eth_estimateGas")).to.equal(1);
  });

  it("cancelAuthorization front-running a pending settle: it reverts once at the relayer's expense (counted in metrics) and answers Authorization already used naming no transaction; the payer's next settles are refused without sending until REVERT_PENALTY_SECONDS pass", async () => {
    const opened = await openFacilitator();
    const { chain } = opened;
    const payment = await makePayment(chain);
    const domain = { name: chain.info.domain.name, version: chain.info.domain.version, chainId: chain.info.chainId, verifyingContract: chain.token };

    const { answer, settlement } = await settleFrontRun(opened, payment.body, async () => {
      const cancel = await opened.buyer.signTypedData({
        domain,
        types: CANCEL_AUTHORIZATION_TYPES,
        primaryType: "CancelAuthorization",
        message: { authorizer: opened.buyer.address, nonce: payment.message.nonce },
      });
      const { v, r, s } = parseSignature(cancel);
      return chain.contract.write.cancelAuthorization([opened.buyer.address, payment.message.nonce, Number(v), r, s], { account: opened.buyer.address, ...FRONT_RUN });
    });
    expect(settlement.status).to.equal("reverted");
    // The nonce was spent by the payer's cancel: already used, and no transaction is this payment.
    expectFailed(answer, SettleError.alreadyUsed);
    expect(await revertedGas(opened)).to.equal(Number(settlement.gasUsed));
    const lookup = await request(opened.app).get("/v2/x402/settlements").query({ network: "cronos-testnet", from: payment.message.from, nonce: payment.message.nonce });
    expect(lookup.body).to.deep.include({ status: "failed", error: SettleError.alreadyUsed, txHash: settlement.transactionHash });

    // Under the penalty: refused before any simulation, nothing sent; another payer is not affected.
    const nonce = await relayerNonce(opened);
    opened.rpc.reset();
    const next = await makePayment(chain);
    expectFailed(await settle(opened, next.body), SettleError.failedOnChain);
    expect(await relayerNonce(opened)).to.equal(nonce);
    expect(opened.rpc.count("eth_estimateGas")).to.equal(0);
    const other = await makePayment(chain, { payer: privateKeyToAccount(HARDHAT_KEYS.buyer2) });
    expect((await settle(opened, other.body)).event).to.equal("payment.settled");

    // The penalty lasts 600 s of the chain's clock (the default) from the block that reverted.
    const revertedAt = (await chain.publicClient.getBlock({ blockNumber: settlement.blockNumber })).timestamp;
    await chain.networkHelpers.time.increaseTo(revertedAt + 599n);
    expectFailed(await settle(opened, next.body), SettleError.failedOnChain);
    await chain.networkHelpers.time.increaseTo(revertedAt + 600n);
    expect((await settle(opened, next.body)).event).to.equal("payment.settled");
    expect(await revertedGas(opened)).to.equal(Number(settlement.gasUsed));
  });

  it("a wallet whose isValidSignature flips after a cheap poke(): after its settle reverts, five more attempts from it are refused without sending; a wallet with the same code is not affected", async () => {
    const opened = await openFacilitator();
    const { chain } = opened;
    const attacker: Address = privateKeyToAccount(generatePrivateKey()).address;
    const first = await deployFlipWallet(chain);
    const twin = await deployFlipWallet(chain);
    expect(await chain.publicClient.getCode({ address: twin.payer.address })).to.equal(await chain.publicClient.getCode({ address: first.payer.address }));
    for (const wallet of [first, twin]) await chain.contract.write.mint([wallet.payer.address, 10n]);
    const nonceBefore = await relayerNonce(opened);

    const { answer, settlement } = await settleFrontRun(opened, (await walletPayment(chain, first.payer, { payTo: attacker, amount: 1n })).body, () =>
      first.contract.write.poke(FRONT_RUN),
    );
    expect(settlement.status).to.equal("reverted");
    expectFailed(answer, SettleError.failedOnChain, { txHash: settlement.transactionHash });

    // The wallet accepts its owner's signature again: a simulation would pass; only the penalty stops the settles.
    await first.contract.write.unpoke();
    opened.rpc.reset();
    for (let i = 0; i < 5; i++) {
      const { body } = await walletPayment(chain, first.payer, { payTo: attacker, amount: 1n });
      expect((await request(opened.app).post("/v2/x402/verify").send(body)).body).to.deep.equal({ isValid: true, invalidReason: null });
      expectFailed(await settle(opened, body), SettleError.failedOnChain);
    }
    expect(await relayerNonce(opened)).to.equal(nonceBefore + 1);
    expect(opened.rpc.count("eth_estimateGas")).to.equal(0);
    expect(await revertedGas(opened)).to.equal(Number(settlement.gasUsed));
    expect(await chain.contract.read.balanceOf([attacker])).to.equal(0n);

    // The penalty is the misbehaving wallet's own: a wallet of the same code (someone else's) settles at once.
    expect((await settle(opened, (await walletPayment(chain, twin.payer, { payTo: attacker, amount: 1n })).body)).event).to.equal("payment.settled");
    expect(await chain.contract.read.balanceOf([attacker])).to.equal(1n);
    expect(await relayerNonce(opened)).to.equal(nonceBefore + 2);

    await chain.networkHelpers.time.increase(600);
    expect((await settle(opened, (await walletPayment(chain, first.payer, { payTo: attacker, amount: 1n })).body)).event).to.equal("payment.settled");
  });

  for (const dialect of ["cronos", "x402v2"] as const) {
    it(`a copy of the relayer's pending transaction, mined first with a higher tip: the settle answers paid with the copy's hash (${dialect}), the payee is paid once, the payer is not penalised`, async () => {
      const opened = await openFacilitator();
      const { chain } = opened;
      const payment = await makePayment(chain);
      const payee = payment.payTo;
      const [payeeBefore, payerBefore] = await Promise.all([chain.contract.read.balanceOf([payee]), chain.contract.read.balanceOf([opened.buyer.address])]);
      const nonce = await relayerNonce(opened);
      const query = { network: "cronos-testnet", from: payment.message.from, nonce: payment.message.nonce };
      const body = dialect === "cronos" ? payment.body : v2BodyOf(payment);
      // Anyone watching the pending pool: the copier is an unrelated funded account (Hardhat #15, LOCAL-ONLY).
      const copier = chain.wallets[15]!;
      await setAutomine(opened.chain.connection.provider, false);
      let copyHash: Hex;
      let settling;
      try {
        settling = request(opened.app).post("/v2/x402/settle").send(body).then((r) => r);
        const pending = await waitFor(() => request(opened.app).get("/v2/x402/settlements").query(query), (r) => Boolean(r.body.txHash), "the settlement's hash in its lookup", WAIT_MS, 10);
        const ours = await chain.publicClient.getTransaction({ hash: pending.body.txHash });
        copyHash = await copier.sendTransaction({ to: ours.to!, data: ours.input, ...FRONT_RUN });
        await chain.networkHelpers.mine();
      } finally {
        await setAutomine(opened.chain.connection.provider, true);
      }
      const answer = await settling;
      const copy = await chain.publicClient.getTransactionReceipt({ hash: copyHash });
      expect(copy.status).to.equal("success");
      // The relayer's own transaction was mined after the copy, in the same block, and reverted.
      const block = await chain.publicClient.getBlock({ blockNumber: copy.blockNumber, includeTransactions: true });
      const relayed = block.transactions.filter((tx) => tx.from.toLowerCase() === RELAYER.toLowerCase());
      expect(relayed).to.have.length(1);
      const reverted = await chain.publicClient.getTransactionReceipt({ hash: relayed[0]!.hash });
      expect(reverted.status).to.equal("reverted");
      expect(reverted.transactionIndex).to.be.above(copy.transactionIndex);

      expect(answer.status).to.equal(200);
      if (dialect === "cronos") {
        expect(answer.body).to.deep.equal({
          x402Version: 1,
          event: "payment.settled",
          network: "cronos-testnet",
          timestamp: new Date(Number(block.timestamp) * 1000).toISOString(),
          txHash: copyHash,
          from: payment.message.from,
          to: payee,
          value: "1000000",
          blockNumber: Number(copy.blockNumber),
        });
      } else {
        expect(answer.body).to.deep.equal({ success: true, payer: payment.message.from, transaction: copyHash, network: "eip155:338" });
      }
      // Paid exactly once; the status lookup tells the same; the relayer's nonces have no gap.
      expect(await chain.contract.read.balanceOf([payee])).to.equal(payeeBefore + 1_000_000n);
      expect(await chain.contract.read.balanceOf([opened.buyer.address])).to.equal(payerBefore - 1_000_000n);
      const lookup = await request(opened.app).get("/v2/x402/settlements").query(query);
      expect(lookup.body).to.deep.include({ status: "settled", txHash: copyHash, blockNumber: Number(copy.blockNumber) });
      expect(await chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "latest" })).to.equal(nonce + 1);
      // The relayer paid for the revert (counted), but the payer did nothing wrong: its next settle goes through.
      expect(await revertedGas(opened)).to.equal(Number(reverted.gasUsed));
      const next = await makePayment(chain);
      expect((await settle(opened, next.body)).event).to.equal("payment.settled");
      expect(await chain.contract.read.balanceOf([payee])).to.equal(payeeBefore + 2_000_000n);
    });
  }

  describe("a copy mined first while the ledger or the chain's logs cannot be read: decided from the chain, never failed on a guess", () => {
    type Opened = Awaited<ReturnType<typeof openFacilitator>>;

    /**
     * Starts a settle with automine off; once its transaction is in the mempool, a copier sends the same
     * input with a higher tip, `meanwhile` runs (takes the ledger or an RPC method down), and one block
     * mines both: the copy pays, the relayer's transaction reverts. Returns the answer and both hashes.
     */
    async function copyMinedFirst(opened: Opened, body: object, meanwhile: () => void) {
      const { chain } = opened;
      const nonce = await relayerNonce(opened);
      await setAutomine(opened.chain.connection.provider, false);
      try {
        const answering = request(opened.app).post("/v2/x402/settle").set("X402-Version", "1").send(body).then((r) => r);
        expect(await waitUntil(async () => (await relayerNonce(opened)) === nonce + 1, 10_000, 10), "the settlement reached the mempool").to.equal(true);
        const pending = await chain.publicClient.getBlock({ blockTag: "pending", includeTransactions: true });
        const ours = pending.transactions.find((tx) => tx.from.toLowerCase() === RELAYER.toLowerCase())!;
        const copyHash = await chain.wallets[15]!.sendTransaction({ to: ours.to!, data: ours.input, ...FRONT_RUN });
        meanwhile();
        await chain.networkHelpers.mine();
        const answer = await answering;
        expect((await chain.publicClient.getTransactionReceipt({ hash: copyHash })).status).to.equal("success");
        expect((await chain.publicClient.getTransactionReceipt({ hash: ours.hash })).status).to.equal("reverted");
        return { answer, copyHash, ourHash: ours.hash };
      } finally {
        await setAutomine(opened.chain.connection.provider, true);
      }
    }

    const lookup = (opened: Opened, payment: Awaited<ReturnType<typeof makePayment>>) =>
      request(opened.app).get("/v2/x402/settlements").query({ network: "cronos-testnet", from: payment.message.from, nonce: payment.message.nonce });

    async function open(env: Record<string, string> = {}) {
      const switchable = switchableLedger(openMemoryLedger());
      const { logger, lines } = recordingLogger();
      // Reconciler rounds and outage probes of a fraction of a second: what is left to them is decided within the test.
      const opened = await openFacilitator("cronos-testnet", { RECONCILE_INTERVAL_MS: "200", ...env }, { ledger: switchable.ledger, logger });
      return { opened, switchable, lines };
    }

    it("the ledger unreachable when the relayer's transaction reverts: answered paid with the copy's hash (from the chain alone), nobody penalised, the record written when the ledger is back", async () => {
      const { opened, switchable, lines } = await open();
      try {
        const payment = await makePayment(opened.chain);
        const payeeBefore = await opened.chain.contract.read.balanceOf([payment.payTo]);
        const { answer, copyHash } = await copyMinedFirst(opened, payment.body, () => (switchable.down = true));
        expect([answer.status, answer.body.event, answer.body.txHash], JSON.stringify(answer.body)).to.deep.equal([200, "payment.settled", copyHash]);
        expect(lines.filter((l) => l.message === "settlement mined while the ledger is unreachable: answered settled, record kept in the outbox").map((l) => l.fields.txHash)).to.deep.equal([copyHash]);
        expect(lines.filter((l) => l.message === "settlement reverted on chain")).to.deep.equal([]);

        switchable.down = false;
        expect(await waitUntil(async () => (await lookup(opened, payment)).body.status === "settled", 10_000, 50), "the outbox written").to.equal(true);
        expect((await lookup(opened, payment)).body).to.deep.include({ status: "settled", txHash: copyHash });
        expect(await opened.chain.contract.read.balanceOf([payment.payTo])).to.equal(payeeBefore + 1_000_000n);
        // No penalty was kept for the database's return: the payer's next settle goes through.
        expect((await settle(opened, (await makePayment(opened.chain)).body)).event).to.equal("payment.settled");
      } finally {
        await opened.facilitator.close();
        await switchable.ledger.close();
      }
    });

    for (const [what, method] of [
      ["the token's logs cannot be read (and the ledger is unreachable)", "eth_getLogs"],
      ["authorizationState cannot be read", "eth_call"],
    ] as const) {
      it(`${what} when the relayer's transaction reverts: 503 with no verdict, nobody penalised; once the chain answers, the reconciler records the copy's payment and a retry names it`, async () => {
        const { opened, switchable, lines } = await open();
        try {
          const payment = await makePayment(opened.chain);
          const { answer, copyHash, ourHash } = await copyMinedFirst(opened, payment.body, () => {
            opened.rpc.failing.add(method);
            if (method === "eth_getLogs") switchable.down = true;
          });
          expect(answer.status, JSON.stringify(answer.body)).to.equal(503);
          expect(answer.headers["retry-after"]).to.equal("2");
          expect(answer.body.event).to.equal(undefined);
          expect(answer.body.error).to.match(new RegExp(`^Service unavailable: settlement transaction ${ourHash} on cronos-testnet reverted and it is not known yet whether the authorization was paid elsewhere \\(`));
          expect(lines.filter((l) => l.message === "settlement reverted on chain")).to.deep.equal([]);

          opened.rpc.failing.delete(method);
          switchable.down = false;
          expect(await waitUntil(async () => (await lookup(opened, payment)).body.status === "settled", 10_000, 50), "the reconciler decided the row").to.equal(true);
          expect((await lookup(opened, payment)).body).to.deep.include({ status: "settled", txHash: copyHash });
          // The retry the 503 invited: the authorization was paid, by the copy.
          expectFailed(await settle(opened, payment.body), VerifyReason.alreadyUsed, { txHash: copyHash });
          // Not penalised: the payer's next settle goes through.
          expect((await settle(opened, (await makePayment(opened.chain)).body)).event).to.equal("payment.settled");
        } finally {
          await opened.facilitator.close();
          await switchable.ledger.close();
        }
      });
    }
  });
});
