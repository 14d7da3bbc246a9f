import { expect } from "chai";
import { createPublicClient, custom, keccak256, type Hex, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { KeyNotLeasedError, Relayer, RelaySendError, type KeyLease, type RelayHooks, type SignedRelay } from "../../src/chain/relayer/index.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { openChain } from "../helpers/token.js";
import { setAutomine } from "../helpers/mining.js";

// The relayer's side of "a key sends only under its lease", on a real local chain (EDR) with automine
// off: a transaction waits in the pool until the test mines a block. The lease is the port the
// settlement room fills in (its validity, its generation, the gap fillers' write-ahead record); here the
// test holds it. Each relayer talks to the node through a transport that notes every raw transaction it
// broadcasts, on its way to the node.

const KEY = HARDHAT_KEYS.relayer;
const ADDRESS = privateKeyToAccount(KEY).address;
const SELLER = privateKeyToAccount(HARDHAT_KEYS.seller).address;

type Chain = Awaited<ReturnType<typeof openChain>>;

/** A lease the test turns on and off, recording the gap fillers written ahead under it (or refusing them). */
function testLease(epoch: number) {
  const fillers: SignedRelay[] = [];
  const lease = {
    epoch,
    live: true,
    refuseFillers: false,
    valid: () => lease.live,
    fillers: {
      async beforeBroadcast(tx: SignedRelay) {
        if (lease.refuseFillers) throw new Error("the ledger refused the gap filler: the key is leased elsewhere");
        fillers.push(tx);
      },
    } satisfies RelayHooks,
  };
  return { lease: lease as typeof lease & KeyLease, fillers };
}

/** Records each signed version a send's hooks see (the settlement's write-ahead records). */
function recording(): { hooks: RelayHooks; signed: SignedRelay[] } {
  const signed: SignedRelay[] = [];
  return { hooks: { beforeBroadcast: async (tx) => void signed.push(tx) }, signed };
}

/** A leased relayer of the key, and the hashes of what it broadcast (in order, repeats included). */
function relayerOn(chain: Chain): { relayer: Relayer; broadcast: Hex[] } {
  const broadcast: Hex[] = [];
  const provider = chain.connection.provider;
  const client = createPublicClient({
    transport: custom({
      request: ({ method, params }: { method: string; params?: unknown }) => {
        if (method === "eth_sendRawTransaction") broadcast.push(keccak256((params as [Hex])[0]));
        return provider.request({ method, params: params as unknown[] });
      },
    }),
  }) as PublicClient;
  // A fresh fee quote at every use: the test changes the base fee between rounds.
  return { relayer: new Relayer({ client, chainId: 338, privateKeys: [KEY], leased: true, replaceAfterSeconds: 3, pollingIntervalMs: 0 }), broadcast };
}

/** Whether the node holds `hash`, mined or waiting (in its pool, or queued behind a missing nonce). */
const known = (chain: Chain, hash: Hex) => chain.publicClient.getTransaction({ hash }).then(() => true, () => false);
const drop = (chain: Chain, hash: Hex) => chain.connection.provider.request({ method: "hardhat_dropTransaction", params: [hash] });
/** Mines one block `seconds` of chain time later (the relayer's clock): a transaction waiting on a missing nonce stays in the pool. */
const later = (chain: Chain, seconds: number) => chain.networkHelpers.time.increase(seconds);
const minedNonce = (chain: Chain) => chain.publicClient.getTransactionCount({ address: ADDRESS, blockTag: "latest" });

/** A call that reverts now (the token knows no such function): a gap filler takes its nonce once it is stale. */
const failing = (chain: Chain) => ({ to: chain.token, data: "0xdeadbeef" as Hex, gas: 100_000n });
const payment = { to: SELLER, data: "0x" as Hex, gas: 21_000n };

describe("relayer: a key sends only under its lease", function () {
  this.timeout(60_000);
  let chain: Chain;

  beforeEach(async () => {
    chain = await openChain("cronos-testnet");
    await setAutomine(chain.connection.provider, false);
  });

  it("refuses to send from a key not leased yet, or whose lease is about to lapse, before signing anything", async () => {
    const { relayer, broadcast } = relayerOn(chain);
    const { hooks, signed } = recording();
    const before = await relayer.send(payment, ADDRESS, hooks).catch((error: unknown) => error);
    expect(before).to.be.instanceOf(KeyNotLeasedError).and.deep.include({ address: ADDRESS });
    const { lease } = testLease(1);
    await relayer.adopt(ADDRESS, async () => [], lease);
    const sent = await relayer.send(payment, ADDRESS, hooks);
    expect(signed.map((tx) => [tx.hash, tx.nonce, tx.epoch])).to.deep.equal([[sent.hash, 0, 1]]);
    lease.live = false;
    expect(await relayer.send(payment, ADDRESS, hooks).catch((error: unknown) => error)).to.be.instanceOf(KeyNotLeasedError);
    expect([signed.length, broadcast]).to.deep.equal([1, [sent.hash]]);
  });

  it("while its lease is lapsing, a gap is not filled and nothing is re-broadcast; renewed, the gap filler is written ahead under the lease and sent", async () => {
    const { relayer, broadcast } = relayerOn(chain);
    const { lease, fillers } = testLease(4);
    await relayer.adopt(ADDRESS, async () => [], lease);
    const doomed = await relayer.send(failing(chain), ADDRESS);
    const waiting = await relayer.send(payment, ADDRESS);
    await drop(chain, doomed.hash);
    // Nonce 0 is missing below nonce 1, and stale: a gap a filler would take.
    await later(chain, 10);
    lease.live = false;
    await relayer.tend();
    expect([broadcast, fillers]).to.deep.equal([[doomed.hash, waiting.hash], []]);

    // The ledger refuses the filler's record (the key went to another instance meanwhile): nothing is sent.
    lease.live = true;
    lease.refuseFillers = true;
    await relayer.tend();
    expect(broadcast).to.deep.equal([doomed.hash, waiting.hash]);

    lease.refuseFillers = false;
    await relayer.tend();
    expect(fillers.map((tx) => [tx.nonce, tx.epoch, tx.from])).to.deep.equal([[0, 4, ADDRESS]]);
    expect(broadcast).to.deep.equal([doomed.hash, waiting.hash, fillers[0]!.hash]);
    expect(doomed.superseded).to.equal(true);
    await chain.networkHelpers.mine();
    expect(await minedNonce(chain)).to.equal(2);
    const filled = await chain.publicClient.getTransaction({ hash: fillers[0]!.hash });
    expect([filled.to, filled.value, filled.nonce, filled.input]).to.deep.equal([ADDRESS.toLowerCase(), 0n, 0, "0x"]);
    expect((await chain.publicClient.getTransactionReceipt({ hash: waiting.hash })).status).to.equal("success");
  });

  it("a replacement recorded just as the lease lapses is not broadcast; a stuck transaction is re-priced only under a live lease", async () => {
    const { relayer, broadcast } = relayerOn(chain);
    const { lease } = testLease(2);
    await relayer.adopt(ADDRESS, async () => [], lease);
    const replacements: SignedRelay[] = [];
    const stuck = await relayer.send(payment, ADDRESS, {
      async beforeBroadcast(tx) {
        if (!tx.replaces) return;
        replacements.push(tx);
        // The lease lapses while the first replacement's record is being written.
        if (replacements.length === 1) lease.live = false;
      },
    });
    const priced = await chain.publicClient.getTransaction({ hash: stuck.hash });
    await chain.connection.provider.request({ method: "hardhat_setNextBlockBaseFeePerGas", params: [`0x${(priced.maxFeePerGas! * 10n).toString(16)}`] });
    await later(chain, 10);
    await relayer.tend();
    // Recorded (the settlement's record stands for whoever holds the key next), never broadcast.
    expect(replacements.map((tx) => [tx.nonce, tx.replaces, tx.epoch])).to.deep.equal([[0, stuck.hash, 2]]);
    expect([broadcast, stuck.hashes()]).to.deep.equal([[stuck.hash], [stuck.hash]]);
    await relayer.tend();
    expect([replacements.length, broadcast.length]).to.deep.equal([1, 1]);

    lease.live = true;
    await relayer.tend();
    expect(replacements).to.have.length(2);
    expect(broadcast).to.deep.equal([stuck.hash, replacements[1]!.hash]);
    expect(stuck.hashes()).to.deep.equal([stuck.hash, replacements[1]!.hash]);
    await chain.networkHelpers.mine();
    expect((await chain.publicClient.getTransactionReceipt({ hash: replacements[1]!.hash })).status).to.equal("success");
  });

  it("a first send recorded just as the lease lapses is handed over, not broadcast: kept in flight under the same lease, re-broadcast once it is renewed", async () => {
    const { relayer, broadcast } = relayerOn(chain);
    const { lease } = testLease(1);
    await relayer.adopt(ADDRESS, async () => [], lease);
    const error = await relayer
      .send(payment, ADDRESS, {
        beforeBroadcast: async () => void (lease.live = false),
      })
      .catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RelaySendError).and.deep.include({ maybeSent: true });
    const handed = error as RelaySendError;
    expect(handed.cause).to.be.instanceOf(KeyNotLeasedError);
    expect(handed.transaction?.hashes()).to.deep.equal([handed.hash]);
    expect([broadcast, await known(chain, handed.hash)]).to.deep.equal([[], false]);
    expect(relayer.status()[0]).to.deep.include({ localNonce: 1, inFlight: 1 });

    lease.live = true;
    await later(chain, 10);
    await relayer.tend();
    expect(broadcast).to.deep.equal([handed.hash]);
    await chain.networkHelpers.mine();
    expect((await chain.publicClient.getTransactionReceipt({ hash: handed.hash })).status).to.equal("success");
  });

  it("revoked, a key forgets its transactions and sends nothing; the next holder adopts the recorded versions and the gap filler, which keeps its nonce over the transaction it superseded", async () => {
    const first = relayerOn(chain);
    const held = testLease(1);
    await first.relayer.adopt(ADDRESS, async () => [], held.lease);
    const doomed = recording();
    const paying = recording();
    await first.relayer.send(failing(chain), ADDRESS, doomed.hooks);
    const sent = await first.relayer.send(payment, ADDRESS, paying.hooks);
    await drop(chain, doomed.signed[0]!.hash);
    await later(chain, 10);
    await first.relayer.tend();
    const filler = held.fillers[0]!;
    expect(first.broadcast).to.deep.equal([doomed.signed[0]!.hash, sent.hash, filler.hash]);

    // The lease goes to another instance: the first forgets what it followed and sends nothing more.
    expect(first.relayer.revoke(ADDRESS)).to.equal(2);
    expect(first.relayer.status()[0]).to.deep.include({ localNonce: undefined, inFlight: 0 });
    await drop(chain, filler.hash);
    await later(chain, 10);
    await first.relayer.tend();
    expect(await first.relayer.send(payment, ADDRESS).catch((e: unknown) => e)).to.be.instanceOf(KeyNotLeasedError);
    expect(first.broadcast).to.have.length(3);

    // The next holder reads the records: the settlement's transaction at nonce 0, the filler that superseded it, and nonce 1.
    const next = relayerOn(chain);
    const taken = testLease(2);
    const adoptedHooks = recording();
    await next.relayer.adopt(
      ADDRESS,
      async () => [
        { raws: [doomed.signed[0]!.raw], hooks: adoptedHooks.hooks },
        { raws: [filler.raw], hooks: taken.lease.fillers, filler: true },
        { raws: [paying.signed[0]!.raw], hooks: adoptedHooks.hooks },
      ],
      taken.lease,
    );
    expect(next.relayer.status()[0]).to.deep.include({ inFlight: 2 });
    // Its first round starts their clocks; a later one finds them stale.
    await next.relayer.tend();
    await later(chain, 10);
    await next.relayer.tend();
    // The dropped filler is broadcast again as signed: neither the superseded call nor a second filler.
    expect([next.broadcast, taken.fillers, adoptedHooks.signed]).to.deep.equal([[filler.hash], [], []]);
    await chain.networkHelpers.mine();
    expect(await minedNonce(chain)).to.equal(2);
    expect((await chain.publicClient.getTransaction({ hash: filler.hash })).nonce).to.equal(0);
    // The first instance's receipt wait goes on over what it knew: its transaction was mined.
    expect((await chain.publicClient.getTransactionReceipt({ hash: sent.hashes()[0]! })).status).to.equal("success");
    expect(first.broadcast).to.have.length(3);
    const after = await next.relayer.send(payment, ADDRESS);
    expect((await chain.publicClient.getTransaction({ hash: after.hash })).nonce).to.equal(2);
  });
});
