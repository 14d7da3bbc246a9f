import { expect } from "chai";
import { keccak256, parseEther, parseTransaction } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { Relayer, RelaySendError, type SignedRelay } from "../../src/chain/relayer/index.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { openChain } from "../helpers/token.js";

const relayerAddress = privateKeyToAccount(HARDHAT_KEYS.relayer).address;
const seller = privateKeyToAccount(HARDHAT_KEYS.seller).address;

describe("relayer: hooks around each broadcast (the ledger's write-ahead record)", () => {
  it("shows each signed transaction, raw and all, before its broadcast, then what the node said", async () => {
    const chain = await openChain("cronos-testnet");
    const relayer = new Relayer({ client: chain.publicClient, chainId: 338, privateKeys: [HARDHAT_KEYS.relayer] });
    const events: string[] = [];
    let seen: SignedRelay | undefined;
    const sent = await relayer.send({ to: seller, data: "0x", gas: 21_000n }, relayerAddress, {
      async beforeBroadcast(tx) {
        seen = tx;
        // Not broadcast yet: the node does not know the transaction.
        events.push(`before: ${(await chain.publicClient.getTransactionCount({ address: relayerAddress, blockTag: "pending" })) === 0}`);
      },
      afterBroadcast: (tx, outcome) => events.push(`after: ${outcome} ${tx.hash === seen?.hash}`),
    });
    expect(events).to.deep.equal(["before: true", "after: accepted true"]);
    expect(seen).to.deep.include({ hash: sent.hash, from: relayerAddress, nonce: 0 });
    expect(keccak256(seen!.raw)).to.equal(sent.hash);
    expect(parseTransaction(seen!.raw)).to.deep.include({ to: seller.toLowerCase(), nonce: 0, gas: 21_000n, maxFeePerGas: seen!.feeCap });
    expect((await chain.publicClient.getTransactionReceipt({ hash: sent.hash })).status).to.equal("success");
  });

  it("broadcasts nothing and keeps the nonce free when the hook refuses (a fenced write-ahead record)", async () => {
    const chain = await openChain("cronos-testnet");
    const relayer = new Relayer({ client: chain.publicClient, chainId: 338, privateKeys: [HARDHAT_KEYS.relayer] });
    const refused = new Error("no longer ours");
    const error = await relayer
      .send({ to: seller, data: "0x", gas: 21_000n }, relayerAddress, {
        beforeBroadcast: async () => {
          throw refused;
        },
      })
      .catch((e: unknown) => e);
    expect(error).to.be.instanceOf(RelaySendError).and.deep.include({ maybeSent: false, cause: refused });
    expect(await chain.publicClient.getTransactionCount({ address: relayerAddress, blockTag: "pending" })).to.equal(0);
    const next = await relayer.send({ to: seller, data: "0x", gas: 21_000n }, relayerAddress);
    expect((await chain.publicClient.getTransaction({ hash: next.hash })).nonce).to.equal(0);
  });

  it("reports a refusal to the hook, then the retry with a fresh nonce as accepted", async () => {
    const chain = await openChain("cronos-testnet");
    const relayer = new Relayer({ client: chain.publicClient, chainId: 338, privateKeys: [HARDHAT_KEYS.relayer] });
    await relayer.send({ to: seller, data: "0x", gas: 21_000n }, relayerAddress);
    // Someone else spends the key's next nonce: the relayer's local nonce is stale.
    const wallet = await chain.viem.getWalletClient(relayerAddress);
    await wallet.sendTransaction({ to: relayerAddress, value: parseEther("0.001") });
    const outcomes: Array<[number, string]> = [];
    const sent = await relayer.send({ to: seller, data: "0x", gas: 21_000n }, relayerAddress, {
      afterBroadcast: (tx, outcome) => outcomes.push([tx.nonce, outcome]),
    });
    expect(outcomes).to.deep.equal([
      [1, "refused"],
      [2, "accepted"],
    ]);
    expect((await chain.publicClient.getTransaction({ hash: sent.hash })).nonce).to.equal(2);
  });
});
