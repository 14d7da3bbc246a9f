import { expect } from "chai";
import { keccak256, parseGwei, parseTransaction, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startFacilitatorProcess, type FacilitatorProcess } from "../../src/harness/cluster.js";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import { openLedger } from "../../src/ledger/open.js";
import type { Ledger, SettlementRecord } from "../../src/ledger/types.js";
import { SettleError } from "../../src/protocol/reasons.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { post, QUICK, watchForExits } from "../helpers/instances.js";
import { openProxiedChain, type ProxiedChain } from "../helpers/proxied-chain.js";
import { waitUntil, WAIT_MS } from "../helpers/wait.js";

// Issue 30 item 5, as a fault: two facilitator processes share one relayer key through PostgreSQL. The
// one holding its lease is frozen (SIGSTOP) past the lease while it has a gap to fill (its lowest
// transaction dropped, its authorization expired) and transactions to replace (fees rose past them);
// the other takes the key over and does both; then the first resumes. Each instance reaches the chain
// through a proxy of its own, so what each one broadcast is known exactly. Blocks come only when the
// test mines them.

const RELAYER = privateKeyToAccount(HARDHAT_KEYS.relayer).address;
const AMOUNT = 1_000_000n;
const freshPayee = (): Address => privateKeyToAccount(generatePrivateKey()).address;

describe("a relayer key is used only under its lease: an instance frozen past its lease, the key taken over, the instance resumed", function () {
  this.timeout(180_000);
  let proxied: ProxiedChain;
  let postgres: TestPostgres;
  let ledger: Ledger;
  const processes: FacilitatorProcess[] = [];

  before(async () => {
    [proxied, postgres] = await Promise.all([openProxiedChain(2), startTestPostgres()]);
    ledger = await openLedger({ databaseUrl: postgres.url });
  });
  after(async () => {
    for (const instance of processes) instance.child.kill("SIGCONT");
    await Promise.all(processes.map((instance) => instance.kill()));
    await ledger?.close();
    await postgres?.stop();
    await proxied?.close();
  });

  const chain = () => proxied.chain;
  const minedNonce = () => chain().publicClient.getTransactionCount({ address: RELAYER, blockTag: "latest" });
  const pendingNonce = () => chain().publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
  const balanceOf = (address: Address) => chain().contract.read.balanceOf([address]);
  const rowOf = async (payment: Awaited<ReturnType<typeof makePayment>>): Promise<SettlementRecord> =>
    (await ledger.get({ chainId: 338, token: chain().token, authorizer: payment.message.from, nonce: payment.message.nonce }))!;
  /** Hashes and nonces of what went out through a proxy, in order. */
  const broadcastBy = (proxy: number) => proxied.proxies[proxy]!.broadcasts.map((raw) => ({ hash: keccak256(raw), nonce: parseTransaction(raw).nonce! }));


  // Every wait below polls every 50 ms: a check that mines or moves chain time does so once a poll.
  const logged = (instance: FacilitatorProcess, message: string) => instance.logs.filter((line) => line.msg === message);

  it("exactly one transaction per relayer nonce on chain, none sent by both instances, every settlement decided once, each payee paid once", async () => {
    const env = {
      ...QUICK,
      DATABASE_URL: postgres.url,
      RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer,
      REPLACE_AFTER_SECONDS: "3",
      SETTLE_TIMEOUT_SECONDS: "25",
    };
    const first = await startFacilitatorProcess({ ...env, CRONOS_TESTNET_RPC_URL: proxied.proxies[0]!.url });
    processes.push(first);
    await waitUntil("the first instance holds the key", () => logged(first, "relayer key lease acquired").length === 1, WAIT_MS, 50);
    const second = await startFacilitatorProcess({ ...env, CRONOS_TESTNET_RPC_URL: proxied.proxies[1]!.url });
    processes.push(second);
    const exits = watchForExits([first, second]);

    const body = async () => {
      await proxied.proxies[0]!.chain.automine(false);
      // A block now: the chain's clock as the facilitator reads it (the head's time), not the time of the last
      // block mined before the instances' start-up (which takes long on a loaded machine).
      await proxied.proxies[0]!.chain.mine();
      const head = await chain().publicClient.getBlock();
      // The lowest one's authorization expires: once it is dropped, only a gap filler can take its nonce.
      const expiring = await makePayment(chain(), { payTo: freshPayee(), validBefore: head.timestamp + 30n });
      const payments = [expiring, await makePayment(chain(), { payTo: freshPayee() }), await makePayment(chain(), { payTo: freshPayee() })];
      const nonce = await pendingNonce();
      const answers: Array<Promise<{ status: number; body: Record<string, unknown> }>> = [];
      for (const [i, payment] of payments.entries()) {
        const answer = post(first.url, "/v2/x402/settle", payment.body);
        let early: unknown;
        answer.then((value) => (early = value), (error: unknown) => (early = String(error)));
        answers.push(answer);
        await waitUntil(`settle ${i} in the pool`, async () => {
          if ((await pendingNonce()) >= nonce + i + 1) return true;
          // Its transaction stays in the pool until a block: an answer with none there is the failure to name.
          if (early !== undefined) throw new Error(`settle ${i} answered without a transaction in the pool: ${JSON.stringify(early)}`);
          return false;
        }, WAIT_MS, 50);
      }
      const firstSends = (await Promise.all(payments.map(rowOf))).map((row) => row.txHash!);
      expect(broadcastBy(0)).to.deep.equal(firstSends.map((hash, i) => ({ hash, nonce: nonce + i })));

      // The lowest is dropped from the pool: a gap below the other two.
      expect(await proxied.proxies[0]!.chain.dropTransaction(firstSends[0]!)).to.equal(true);
      first.child.kill("SIGSTOP");
      // While it is frozen: fees rise past the two waiting transactions, and chain time passes the expiry
      // and the replacement delay. It would now fill the gap and replace both.
      const priced = await chain().publicClient.getTransaction({ hash: firstSends[1]! });
      await proxied.proxies[0]!.chain.setNextBlockBaseFee(priced.maxFeePerGas! * 10n);
      await chain().networkHelpers.time.increase(60);
      expect(await minedNonce()).to.equal(nonce);

      await waitUntil("the second instance took the key over", () => logged(second, "relayer key lease acquired").length === 1, WAIT_MS, 50);
      // Chain time moves on (4 s a block) until the new holder has filled the gap and re-priced both; each
      // block asks twice the last one's base fee, so none of them is mined before the first instance resumes.
      await waitUntil("the new holder filled the gap and replaced both", async () => {
        const sent = new Set(broadcastBy(1).map((tx) => tx.nonce));
        if ([nonce, nonce + 1, nonce + 2].every((n) => sent.has(n))) return true;
        await proxied.proxies[0]!.chain.setNextBlockBaseFee((await chain().publicClient.getBlock()).baseFeePerGas! * 2n);
        await chain().networkHelpers.time.increase(4);
        return false;
      }, WAIT_MS, 50);
      expect(await minedNonce()).to.equal(nonce);
      const sentByFirst = broadcastBy(0).length;

      first.child.kill("SIGCONT");
      const gaveUp = () => first.logs.filter((line) => String(line.msg).startsWith("relayer key lease given up"));
      await waitUntil("the first instance saw its lease was lost", () => gaveUp().length === 1, WAIT_MS, 50);
      // Its loops run on (what it asks of the chain goes through its own proxy, and only its): twenty more
      // requests are rounds of them, after which nothing may have gone out through it.
      const askedAfterResume = proxied.proxies[0]!.methods.length;
      await waitUntil("twenty more requests of the first instance", () => proxied.proxies[0]!.methods.length >= askedAfterResume + 20, WAIT_MS, 50);
      await proxied.proxies[0]!.chain.setNextBlockBaseFee(parseGwei("1"));
      await waitUntil("every nonce mined", async () => {
        if ((await minedNonce()) >= nonce + 3) return true;
        await proxied.proxies[0]!.chain.mine();
        return false;
      }, WAIT_MS, 50);
      const settled = await Promise.all(answers);
      await waitUntil("every row decided", async () => (await Promise.all(payments.map(rowOf))).every((row) => row.status === "settled" || row.status === "failed"), WAIT_MS, 50);

      // Nothing went out through the first instance after it was frozen: its three first sends only. It let
      // go of the three transactions it followed (their records are the new holder's now).
      expect(broadcastBy(0)).to.have.length(sentByFirst).and.to.have.length(3);
      expect(gaveUp().map((line) => [line.msg, line.handedOver])).to.deep.equal([["relayer key lease given up: its transactions in flight are left to the key's next holder", 3]]);
      // No nonce was sent by both once the key changed hands: the second sent only at the three nonces it took over.
      const bySecond = broadcastBy(1);
      expect(new Set(bySecond.map((tx) => tx.nonce))).to.deep.equal(new Set([nonce, nonce + 1, nonce + 2]));
      expect(bySecond.filter((tx) => firstSends.includes(tx.hash))).to.deep.equal([]);

      // Exactly one transaction per nonce on chain, and the key moved on by three.
      expect(await minedNonce()).to.equal(nonce + 3);
      const everything = [...broadcastBy(0), ...bySecond];
      const mined = new Map<number, Hex>();
      for (const tx of everything) {
        const receipt = await chain().publicClient.getTransactionReceipt({ hash: tx.hash }).catch(() => undefined);
        if (!receipt) continue;
        expect(mined.get(tx.nonce) ?? tx.hash, `nonce ${tx.nonce} mined once`).to.equal(tx.hash);
        mined.set(tx.nonce, tx.hash);
      }
      expect([...mined.keys()].sort()).to.deep.equal([nonce, nonce + 1, nonce + 2]);

      // The gap went to a zero-value self-transfer, written ahead by the new holder under its lease (generation 2).
      const filler = await chain().publicClient.getTransaction({ hash: mined.get(nonce)! });
      expect([filler.from, filler.to, filler.value, filler.input]).to.deep.equal([RELAYER.toLowerCase(), RELAYER.toLowerCase(), 0n, "0x"]);
      const secondId = String(logged(second, "relayer key lease acquired")[0]!.instance);
      const fillers = await ledger.pendingFillers({ chainId: 338, relayer: RELAYER, fromNonce: nonce, limit: 10 });
      expect(fillers.filter((f) => f.hash === filler.hash).map((f) => [f.relayerNonce, f.holder, f.leaseEpoch])).to.deep.equal([[nonce, secondId, 2]]);

      // Every settlement decided once, from the chain: the expired one failed (nothing paid), the two others
      // settled by the new holder's replacements, each payee paid once.
      const rows = await Promise.all(payments.map(rowOf));
      expect(rows.map((row) => [row.status, row.errorCode])).to.deep.equal([
        ["failed", "expired"],
        ["settled", undefined],
        ["settled", undefined],
      ]);
      for (const [i, row] of rows.entries()) {
        expect(row.transactions[0]!.hash, `row ${i}: the first instance's send first`).to.equal(firstSends[i]);
        if (i > 0) {
          expect(row.txHash).to.equal(mined.get(nonce + i));
          expect(row.transactions.map((t) => t.hash)).to.include(row.txHash);
        }
      }
      expect(await chain().contract.read.authorizationState([expiring.message.from, expiring.message.nonce])).to.equal(false);
      expect(await Promise.all(payments.map((p) => balanceOf(p.payTo)))).to.deep.equal([0n, AMOUNT, AMOUNT]);
      // The frozen instance's settles, answered once it resumed: from the chain, with the paying hashes.
      expect(settled.map((a) => [a.status, a.body.event, a.body.error ?? null, a.body.txHash])).to.deep.equal([
        [200, "payment.failed", SettleError.expired, firstSends[0]],
        [200, "payment.settled", null, mined.get(nonce + 1)],
        [200, "payment.settled", null, mined.get(nonce + 2)],
      ]);
    };
    try {
      await Promise.race([body(), exits.crashed]);
    } finally {
      exits.done();
      first.child.kill("SIGCONT");
    }
  });
});
