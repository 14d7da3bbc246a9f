import { expect } from "chai";
import { createPublicClient, custom, type Address, type PublicClient, encodeFunctionData, keccak256, parseEther, parseSignature, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { paymentReads, type PaymentReadsParameters } from "../../src/settlement/payment-reads.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { Reconciler, type ReconcilerAction, type ReconcilerOptions } from "../../src/settlement/reconciler.js";
import { MEMORY, openSqliteLedger } from "../../src/ledger/sqlite.js";
import { penaltySubject, type Ledger, type SettlementRecord } from "../../src/ledger/types.js";
import { CANCEL_AUTHORIZATION_TYPES } from "../../src/protocol/eip3009.js";
import { HARDHAT_KEYS, makePayment, sendAuthorization } from "../helpers/facilitator.js";
import { claimInput, settlementDeps, settlementSettings, TestClock } from "../helpers/ledger.js";
import { recordRpc } from "../helpers/rpc.js";
import { openChain } from "../helpers/token.js";
import { setAutomine } from "../helpers/mining.js";

const relayer = privateKeyToAccount(HARDHAT_KEYS.relayer);
const DEAD = "dead-instance";

describe("ledger reconciler: finishing settlements whose owner is gone", function () {
  this.timeout(60_000);
  let chain: Awaited<ReturnType<typeof openChain>>;
  let ledger: Ledger;
  let clock: TestClock;
  let reconciler: Reconciler;
  let actions: Array<[ReconcilerAction, number]>;

  beforeEach(async () => {
    chain = await openChain("cronos-testnet");
    clock = new TestClock();
    ledger = openSqliteLedger({ location: MEMORY, clock: clock.read });
    actions = [];
    reconciler = reconcilerOn();
  });

  /**
   * A reconciler of this suite's ledger and clock over `client` (default the chain's), recording its actions and
   * throwing its errors; `holds`: whether this instance holds a relayer key's lease (default every key).
   */
  function reconcilerOn(
    client: PublicClient = chain.publicClient,
    options: ReconcilerOptions & { holds?: (relayer: Address) => boolean; revertPenaltySeconds?: number } = {},
    chainOptions: Partial<PaymentReadsParameters> = {},
  ): Reconciler {
    const { holds = () => true, revertPenaltySeconds = 0, ...rounds } = options;
    const network = {
      config: { network: "cronos-testnet" as const, chainId: 338, rpcUrls: [], token: chain.token, domain: chain.info.domain },
      paymentReads: paymentReads({ client, chainId: 338, logLookbackBlocks: 1_000, ...chainOptions }),
    };
    return new Reconciler(
      {
        ...settlementDeps(ledger, { now: clock.read, keys: { held: () => [], holds } }),
        settings: settlementSettings({ relayerSafety: { maxSettleGas: 250_000n, erc1271GasLimit: 150_000n, revertPenaltySeconds } }),
        networks: new Map([["cronos-testnet", network]]),
      },
      {
        recheckMs: 5_000,
        onAction: (action, row) => actions.push([action, row.id]),
        onError: (error) => {
          throw error;
        },
        ...rounds,
      },
    );
  }
  afterEach(() => ledger.close());

  /** A signed authorization's token call. */
  async function authorization(options: { validBefore?: bigint } = {}) {
    const payment = await makePayment(chain, options);
    const { r, s, v } = parseSignature(payment.signature);
    const m = payment.message;
    const data = encodeFunctionData({
      abi: tokenAbi,
      functionName: "transferWithAuthorization",
      args: [m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, Number(v), r, s],
    });
    return { payment, data };
  }

  /** A dead instance claimed it and recorded a signed transaction (write-ahead); `broadcast` says whether it got out. */
  async function abandonedSend(options: { validBefore?: bigint; broadcast?: boolean; nonce?: number } = {}) {
    const { payment, data } = await authorization({ validBefore: options.validBefore });
    const m = payment.message;
    const claimed = await ledger.claim(
      claimInput({
        key: { chainId: 338, token: chain.token, authorizer: m.from, nonce: m.nonce },
        payee: m.to,
        value: m.value,
        validBefore: m.validBefore,
        call: { to: chain.token, data, gas: 200_000n },
        owner: DEAD,
      }),
    );
    if (claimed.outcome !== "claimed") throw new Error("not claimed");
    await ledger.acquireLease(relayer.address, DEAD, 60_000);
    const nonce = options.nonce ?? (await chain.publicClient.getTransactionCount({ address: relayer.address, blockTag: "pending" }));
    const fees = await chain.publicClient.estimateFeesPerGas();
    const raw = await relayer.signTransaction({ chainId: 338, to: chain.token, data, gas: 200_000n, nonce, type: "eip1559", ...fees });
    const hash = keccak256(raw);
    await ledger.recordBroadcast({ id: claimed.record.id, owner: DEAD, hash, raw, relayer: relayer.address, relayerNonce: nonce, checkAfterMs: 10_000 });
    if (options.broadcast ?? true) await chain.publicClient.sendRawTransaction({ serializedTransaction: raw });
    clock.advance(10_000); // the owner would have followed it until now
    return { id: claimed.record.id, hash, raw, payment };
  }

  /** Someone else sends the payment's authorization (a buyer's own transaction): it is used before ours. */
  const useElsewhere = (payment: Awaited<ReturnType<typeof abandonedSend>>["payment"]): Promise<Hex> => sendAuthorization(chain, payment);

  const row = async (id: number) => (await ledger.getById(id)) as SettlementRecord;
  const payeeBalance = () => chain.contract.read.balanceOf([privateKeyToAccount(HARDHAT_KEYS.seller).address]);

  it("settles a row whose owner died after the broadcast, with the receipt's block and time", async () => {
    const sent = await abandonedSend();
    expect(await reconciler.tick()).to.equal(1);
    expect(actions).to.deep.equal([["settled", sent.id]]);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: sent.hash });
    const block = await chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    expect(await row(sent.id)).to.deep.include({ status: "settled", txHash: sent.hash, blockNumber: receipt.blockNumber, blockTimestamp: block.timestamp });
    expect((await row(sent.id)).transactions.map((t) => t.state)).to.deep.equal(["mined"]);
    expect(await payeeBalance()).to.equal(1_000_000n);
  });

  it("broadcasts the stored transaction again when the node never got it, then settles it: the payee is paid once", async () => {
    const sent = await abandonedSend({ broadcast: false });
    expect(await chain.publicClient.getTransactionCount({ address: relayer.address })).to.equal(0);
    await reconciler.tick();
    expect(actions).to.deep.equal([["rebroadcast", sent.id]]);
    expect((await row(sent.id)).status).to.equal("sent");
    clock.advance(5_000);
    await reconciler.tick();
    expect(actions).to.deep.equal([
      ["rebroadcast", sent.id],
      ["settled", sent.id],
    ]);
    expect((await row(sent.id)).txHash).to.equal(sent.hash);
    expect(await payeeBalance()).to.equal(1_000_000n);
    expect(await chain.publicClient.getTransactionCount({ address: relayer.address })).to.equal(1);
  });

  it("leaves a forgotten transaction of a relayer key another instance holds to that holder: nothing broadcast, the row stays sent; the holder's reconciler broadcasts it", async () => {
    const sent = await abandonedSend({ broadcast: false });
    const elsewhere = reconcilerOn(chain.publicClient, { holds: () => false });
    await elsewhere.tick();
    expect(actions).to.deep.equal([]);
    expect(await row(sent.id)).to.deep.include({ status: "sent", txHash: sent.hash });
    expect(await chain.publicClient.getTransactionCount({ address: relayer.address, blockTag: "pending" })).to.equal(0);
    clock.advance(5_000);
    const holder = reconcilerOn(chain.publicClient, { holds: (address) => address === relayer.address });
    await holder.tick();
    expect(actions).to.deep.equal([["rebroadcast", sent.id]]);
    expect(await chain.publicClient.getTransactionCount({ address: relayer.address })).to.equal(1);
  });

  it("hands a forgotten transaction this instance's relayer follows to the relayer (it sends it again in the key's nonce order), broadcasting nothing beside it; once the relayer no longer follows it, broadcasts it itself", async () => {
    const sent = await abandonedSend({ broadcast: false });
    const asked: Array<[number, string, number]> = [];
    // What the relayer answers: false (no need: the node has it), true (sent again), undefined (not followed).
    let answer: boolean | undefined = false;
    const follower = reconcilerOn(chain.publicClient, {
      resendFollowed: async (chainId, tx) => {
        asked.push([chainId, tx.relayer, tx.relayerNonce]);
        return answer;
      },
    });
    const pending = () => chain.publicClient.getTransactionCount({ address: relayer.address, blockTag: "pending" });
    await follower.tick();
    expect(actions).to.deep.equal([]);
    expect(asked).to.deep.equal([[338, relayer.address, 0]]);
    expect(await pending()).to.equal(0);
    answer = true;
    clock.advance(5_000);
    await follower.tick();
    // The relayer's word: nothing went out from the reconciler itself.
    expect(actions).to.deep.equal([["rebroadcast", sent.id]]);
    expect(await pending()).to.equal(0);
    answer = undefined;
    clock.advance(5_000);
    await follower.tick();
    expect(actions).to.deep.equal([["rebroadcast", sent.id], ["rebroadcast", sent.id]]);
    expect(asked).to.have.length(3);
    expect(await chain.publicClient.getTransactionCount({ address: relayer.address })).to.equal(1);
  });

  it("leaves a transaction the node holds in its pool alone until it is mined", async () => {
    await setAutomine(chain.connection.provider, false);
    const sent = await abandonedSend();
    await reconciler.tick();
    expect(actions).to.deep.equal([]);
    expect((await row(sent.id)).status).to.equal("sent");
    await chain.networkHelpers.mine();
    clock.advance(5_000);
    await reconciler.tick();
    expect(actions).to.deep.equal([["settled", sent.id]]);
  });

  it("settles with the other transaction when someone else used the authorization and ours never got out", async () => {
    const sent = await abandonedSend({ broadcast: false });
    const other = await useElsewhere(sent.payment);
    await reconciler.tick();
    expect(actions).to.deep.equal([["settled", sent.id]]);
    expect((await row(sent.id)).txHash).to.equal(other);
    expect(await payeeBalance()).to.equal(1_000_000n);
  });

  it("fails a row whose transaction reverted on chain, and lets the authorization be claimed again", async () => {
    // The payer moves its funds away between the write-ahead record and the broadcast: the transfer reverts.
    const { payment, data } = await authorization();
    const balance = await chain.contract.read.balanceOf([payment.message.from]);
    await chain.buyers[0]!.writeContract({ address: chain.token, abi: tokenAbi, functionName: "transfer", args: [chain.deployer.account.address, balance] });
    const claimed = await ledger.claim(
      claimInput({
        key: { chainId: 338, token: chain.token, authorizer: payment.message.from, nonce: payment.message.nonce },
        call: { to: chain.token, data, gas: 200_000n },
        owner: DEAD,
      }),
    );
    if (claimed.outcome !== "claimed") throw new Error("not claimed");
    await ledger.acquireLease(relayer.address, DEAD, 60_000);
    const fees = await chain.publicClient.estimateFeesPerGas();
    const raw = await relayer.signTransaction({ chainId: 338, to: chain.token, data, gas: 200_000n, nonce: 0, type: "eip1559", ...fees });
    const hash = keccak256(raw);
    await ledger.recordBroadcast({ id: claimed.record.id, owner: DEAD, hash, raw, relayer: relayer.address, relayerNonce: 0, checkAfterMs: 0 });
    // The local chain mines the revert and reports it as an error of the send itself.
    await chain.publicClient.sendRawTransaction({ serializedTransaction: raw }).catch(() => undefined);
    expect((await chain.publicClient.getTransactionReceipt({ hash })).status).to.equal("reverted");
    await reconciler.tick();
    expect(actions).to.deep.equal([["reverted", claimed.record.id]]);
    const failed = await row(claimed.record.id);
    expect(failed).to.deep.include({ status: "failed", errorCode: "failedOnChain" });
    expect(failed.transactions.map((t) => t.state)).to.deep.equal(["reverted"]);
    const again = await ledger.claim(claimInput({ key: failed.key, owner: "instance-b" }));
    expect(again.outcome).to.equal("claimed");
  });

  it("a row whose transaction reverted after a copy used the authorization: left as it is while the token's logs cannot be read, settled with the copy once they can", async () => {
    const sent = await abandonedSend({ broadcast: false });
    const copy = await useElsewhere(sent.payment);
    // Ours is mined after the copy, and reverts (the local chain reports it as an error of the send itself).
    await chain.publicClient.sendRawTransaction({ serializedTransaction: sent.raw }).catch(() => undefined);
    expect((await chain.publicClient.getTransactionReceipt({ hash: sent.hash })).status).to.equal("reverted");

    // The reconciler's chain reads go through an RPC whose eth_getLogs is down.
    const rpc = recordRpc(chain.connection.provider);
    rpc.failing.add("eth_getLogs");
    const errors: string[] = [];
    const blind = reconcilerOn(createPublicClient({ transport: custom(rpc.provider) }), { onError: (error) => void errors.push(String(error)) });
    await blind.tick();
    expect(actions).to.deep.equal([]);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include("ECONNREFUSED (test: eth_getLogs is down)");
    const left = await row(sent.id);
    expect(left.status).to.equal("sent");
    expect(left.transactions.map((t) => t.state)).to.deep.equal(["reverted"]);

    rpc.failing.delete("eth_getLogs");
    clock.advance(5_000);
    await blind.tick();
    expect(actions).to.deep.equal([["settled", sent.id]]);
    expect(await row(sent.id)).to.deep.include({ status: "settled", txHash: copy });
    expect(await payeeBalance()).to.equal(1_000_000n);
  });

  /** The payer spends the row's nonce first with another authorization: 1 unit to itself. */
  const substitute = async (payment: Awaited<ReturnType<typeof abandonedSend>>["payment"]): Promise<Hex> =>
    sendAuthorization(chain, await makePayment(chain, { nonce: payment.message.nonce, payTo: payment.message.from, amount: 1n }));

  /** The payer's revert penalty on chain 338, if any (at the chain's latest time). */
  async function penaltyOf(payer: Hex) {
    const now = (await chain.publicClient.getBlock()).timestamp;
    return ledger.activePenalty({ chainId: 338, token: chain.token }, [penaltySubject(payer)], now);
  }

  it("a substitute under the row's nonce (another payee and value) mined while ours never got out: failed Authorization already used in one round, nothing sent, the payer penalised", async () => {
    reconciler = reconcilerOn(chain.publicClient, { revertPenaltySeconds: 600 });
    const sent = await abandonedSend({ broadcast: false });
    const other = await substitute(sent.payment);
    await reconciler.tick();
    expect(actions).to.deep.equal([["failed", sent.id]]);
    const failed = await row(sent.id);
    expect(failed).to.deep.include({ status: "failed", errorCode: "alreadyUsed", txHash: sent.hash });
    expect(failed.txHash).to.not.equal(other);
    expect(await payeeBalance()).to.equal(0n);
    // Ours was never re-broadcast: the relayer sent nothing.
    expect(await chain.publicClient.getTransactionCount({ address: relayer.address, blockTag: "pending" })).to.equal(0);
    const block = await chain.publicClient.getBlock({ blockNumber: (await chain.publicClient.getTransactionReceipt({ hash: other })).blockNumber });
    expect(await penaltyOf(sent.payment.message.from)).to.deep.include({ until: block.timestamp + 600n, txHash: other });
  });

  it("the payer cancels while ours is dropped (the node forgot it): failed Authorization already used in one round, not at validBefore", async () => {
    const sent = await abandonedSend({ broadcast: false });
    const domain = { name: chain.info.domain.name, version: chain.info.domain.version, chainId: chain.info.chainId, verifyingContract: chain.token };
    const payer = privateKeyToAccount(HARDHAT_KEYS.buyer);
    const cancel = await payer.signTypedData({
      domain,
      types: CANCEL_AUTHORIZATION_TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer: payer.address, nonce: sent.payment.message.nonce },
    });
    const { v, r, s } = parseSignature(cancel);
    await chain.contract.write.cancelAuthorization([payer.address, sent.payment.message.nonce, Number(v), r, s]);
    const rpc = recordRpc(chain.connection.provider);
    reconciler = reconcilerOn(createPublicClient({ transport: custom(rpc.provider) }));
    await reconciler.tick();
    expect(actions).to.deep.equal([["failed", sent.id]]);
    expect(await row(sent.id)).to.deep.include({ status: "failed", errorCode: "alreadyUsed" });
    expect(await chain.publicClient.getTransactionCount({ address: relayer.address, blockTag: "pending" })).to.equal(0);
    // Decided: later rounds look at it no more (no scan of the token's logs each round).
    clock.advance(60_000);
    expect(await reconciler.tick()).to.equal(0);
    expect(rpc.count("eth_getLogs")).to.equal(1);
  });

  it("used with no log within LOG_LOOKBACK_BLOCKS is never guessed a cancel: left undecided (the row stays sent); with the token state index naming the block, decided from that one block's logs", async () => {
    const sent = await abandonedSend({ broadcast: false });
    const other = await substitute(sent.payment);
    const spentIn = (await chain.publicClient.getTransactionReceipt({ hash: other })).blockNumber;
    await chain.networkHelpers.mine(10);
    const errors: string[] = [];
    const collect = { onError: (error: unknown) => void errors.push(String(error)) };
    const short = reconcilerOn(chain.publicClient, collect, { logLookbackBlocks: 5 });
    await short.tick();
    expect(actions).to.deep.equal([]);
    expect(errors).to.have.length(1);
    expect(errors[0]).to.include(`settlement ${sent.id} left undecided: the authorization is used, and no log of it was found`);
    expect((await row(sent.id)).status).to.equal("sent");

    // The index's port: the block that spent it, whatever its age (an index that cannot vouch is asked past).
    const asked: Hex[] = [];
    const index = { spentAt: async (_authorizer: Hex, nonce: Hex) => (asked.push(nonce), { spent: true as const, blockNumber: spentIn }) };
    const indexed = reconcilerOn(chain.publicClient, collect, { logLookbackBlocks: 5, index: () => index });
    clock.advance(5_000);
    await indexed.tick();
    expect(asked).to.deep.equal([sent.payment.message.nonce]);
    expect(actions).to.deep.equal([["failed", sent.id]]);
    expect(await row(sent.id)).to.deep.include({ status: "failed", errorCode: "alreadyUsed" });
    expect(await payeeBalance()).to.equal(0n);
  });

  it("fails a row whose authorization expired without being used", async () => {
    const latest = await chain.publicClient.getBlock();
    const sent = await abandonedSend({ broadcast: false, validBefore: latest.timestamp + 60n });
    await chain.networkHelpers.time.increase(120);
    await reconciler.tick();
    expect(actions).to.deep.equal([["failed", sent.id]]);
    expect(await row(sent.id)).to.deep.include({ status: "failed", errorCode: "expired" });
    expect(await payeeBalance()).to.equal(0n);
  });

  it("fails a row whose stored transaction can no longer be mined (its nonce was spent by another)", async () => {
    const sent = await abandonedSend({ broadcast: false, nonce: 0 });
    const wallet = await chain.viem.getWalletClient(relayer.address);
    await wallet.sendTransaction({ to: relayer.address, value: parseEther("0.001"), nonce: 0 });
    await reconciler.tick();
    expect(actions).to.deep.equal([["failed", sent.id]]);
    const failed = await row(sent.id);
    expect(failed).to.deep.include({ status: "failed", errorCode: "failedOnChain" });
    expect(failed.transactions.map((t) => t.state)).to.deep.equal(["dropped"]);
    expect(await payeeBalance()).to.equal(0n);
  });

  it("leaves a row sent when the node refuses its stored transaction but its nonce is not mined (a gap below it: Nonce too high), then settles it once the gap is filled", async () => {
    // Recorded at nonce 1 while nonce 0 is unused: the node refuses it for the gap (a Cronos node, or a backend that
    // lags, answers `invalid nonce` alike). Nothing is mined at nonce 1, so it may still be: never failed for it.
    const sent = await abandonedSend({ broadcast: false, nonce: 1 });
    await reconciler.tick();
    expect(actions).to.deep.equal([]);
    expect(await row(sent.id)).to.deep.include({ status: "sent", txHash: sent.hash });
    expect((await row(sent.id)).transactions.map((t) => t.state)).to.deep.equal(["signed"]);
    // The gap is filled (nonce 0 by another transaction of the key): the stored one is taken and mined.
    const wallet = await chain.viem.getWalletClient(relayer.address);
    await wallet.sendTransaction({ to: relayer.address, value: parseEther("0.001"), nonce: 0 });
    clock.advance(5_000);
    await reconciler.tick();
    expect(actions).to.deep.equal([["rebroadcast", sent.id]]);
    clock.advance(5_000);
    await reconciler.tick();
    expect(actions.at(-1)).to.deep.equal(["settled", sent.id]);
    expect(await payeeBalance()).to.equal(1_000_000n);
  });

  it("puts a claim whose owner did not send back in the queue, and gives it up at the deadline with nothing sent", async () => {
    const claimed = await ledger.claim(claimInput({ owner: DEAD, ownerTtlMs: 1_000, deadlineMs: 10_000 }));
    if (claimed.outcome !== "claimed") throw new Error("not claimed");
    clock.advance(1_000);
    await reconciler.tick();
    expect(actions).to.deep.equal([["requeued", claimed.record.id]]);
    expect((await row(claimed.record.id)).owner).to.equal(undefined);
    clock.advance(9_000);
    await reconciler.tick();
    expect(actions.at(-1)).to.deep.equal(["abandoned", claimed.record.id]);
    expect(await row(claimed.record.id)).to.deep.include({ status: "failed", errorCode: "notSent" });
  });

  it("leaves rows of a chain it does not serve to the instances that serve it", async () => {
    const input = claimInput({ owner: DEAD, deadlineMs: 1 });
    await ledger.claim({ ...input, key: { ...input.key, chainId: 25 } });
    clock.advance(10);
    expect(await reconciler.tick()).to.equal(0);
  });
});
