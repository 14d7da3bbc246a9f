import { expect } from "chai";
import { keccak256, parseGwei } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { FeeCapError, feesAtLeast, initialFees, neededFee, readFeeQuote, replacementFees } from "../../src/chain/fees.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { setAutomine } from "../helpers/mining.js";
import { openChain } from "../helpers/token.js";

const gwei = (value: string) => parseGwei(value);

describe("relayer fees: pricing under a cap, replacements", () => {
  it("prices a new transaction at 1.2 × the base fee plus the tip, clamped to the cap while the network needs less", () => {
    const quote = { baseFeePerGas: gwei("10"), maxPriorityFeePerGas: gwei("1") };
    expect(initialFees(quote, gwei("100"))).to.deep.equal({ maxFeePerGas: gwei("13"), maxPriorityFeePerGas: gwei("1") });
    expect(initialFees(quote, gwei("12"))).to.deep.equal({ maxFeePerGas: gwei("12"), maxPriorityFeePerGas: gwei("1") });
    expect(initialFees({ gasPrice: gwei("7") }, gwei("7"))).to.deep.equal({ gasPrice: gwei("7") });
  });

  it("refuses a new transaction when the network needs more than the cap, naming both in gwei", () => {
    const quote = { baseFeePerGas: gwei("10"), maxPriorityFeePerGas: gwei("1") };
    expect(neededFee(quote)).to.equal(gwei("11"));
    expect(() => initialFees(quote, gwei("10.5"))).to.throw(FeeCapError, "the network asks 11 gwei per gas, above MAX_FEE_PER_GAS_GWEI (10.5 gwei)");
    expect(() => initialFees({ gasPrice: gwei("8") }, gwei("7"))).to.throw(FeeCapError, "the network asks 8 gwei per gas, above MAX_FEE_PER_GAS_GWEI (7 gwei)");
  });

  it("raises both EIP-1559 fees by at least 12.5 % (rounded up), or to what the network asks now when that is more", () => {
    const previous = { maxFeePerGas: 1_000_000_001n, maxPriorityFeePerGas: 100_000_001n };
    const calm = { baseFeePerGas: 1n, maxPriorityFeePerGas: 1n };
    expect(replacementFees(previous, calm, gwei("100"))).to.deep.equal({ maxFeePerGas: 1_125_000_002n, maxPriorityFeePerGas: 112_500_002n });
    const spike = { baseFeePerGas: gwei("50"), maxPriorityFeePerGas: gwei("2") };
    expect(replacementFees(previous, spike, gwei("100"))).to.deep.equal({ maxFeePerGas: gwei("62"), maxPriorityFeePerGas: gwei("2") });
    expect(replacementFees(previous, spike, gwei("60"))).to.deep.equal({ maxFeePerGas: gwei("60"), maxPriorityFeePerGas: gwei("2") });
    expect(replacementFees({ gasPrice: gwei("8") }, { gasPrice: gwei("1") }, gwei("100"))).to.deep.equal({ gasPrice: gwei("9") });
    expect(replacementFees({ gasPrice: gwei("8") }, { gasPrice: gwei("20") }, gwei("100"))).to.deep.equal({ gasPrice: gwei("20") });
  });

  it("sends no replacement above the cap: the transaction keeps its last price", () => {
    const previous = { maxFeePerGas: gwei("10"), maxPriorityFeePerGas: gwei("1") };
    // The network needs more than the cap.
    expect(replacementFees(previous, { baseFeePerGas: gwei("30"), maxPriorityFeePerGas: gwei("1") }, gwei("20"))).to.equal(undefined);
    // The network would take it, but +12.5 % is above the cap.
    expect(replacementFees(previous, { baseFeePerGas: gwei("1"), maxPriorityFeePerGas: gwei("1") }, gwei("11"))).to.equal(undefined);
    expect(replacementFees({ gasPrice: gwei("10") }, { gasPrice: gwei("1") }, gwei("11"))).to.equal(undefined);
  });

  it("re-prices a transaction refused for its fee to what the node named, within the cap; above it, nothing (FeeCapError)", () => {
    const quote = { baseFeePerGas: gwei("10"), maxPriorityFeePerGas: gwei("1") };
    const previous = { maxFeePerGas: gwei("13"), maxPriorityFeePerGas: gwei("1") };
    // Cronos's minimum gas price (20 gwei) against min(fee cap, base fee + tip): the tip makes it up.
    expect(feesAtLeast(previous, quote, gwei("20"), gwei("100"))).to.deep.equal({ maxFeePerGas: gwei("22"), maxPriorityFeePerGas: gwei("10") });
    // The node's base fee (15 gwei) above the fee cap: the fee cap rises to it with its headroom, the tip stays.
    const spiked = { baseFeePerGas: gwei("15"), maxPriorityFeePerGas: gwei("1") };
    expect(feesAtLeast({ maxFeePerGas: gwei("12"), maxPriorityFeePerGas: gwei("1") }, spiked, gwei("15"), gwei("100"))).to.deep.equal({ maxFeePerGas: gwei("19"), maxPriorityFeePerGas: gwei("1") });
    // Nothing named (geth's "transaction underpriced"), or named but already met: both fees rise by 12.5 %.
    expect(feesAtLeast(previous, quote, undefined, gwei("100"))).to.deep.equal({ maxFeePerGas: gwei("13.125"), maxPriorityFeePerGas: gwei("1.125") });
    expect(feesAtLeast(previous, quote, gwei("5"), gwei("100"))).to.deep.equal({ maxFeePerGas: gwei("13.125"), maxPriorityFeePerGas: gwei("1.125") });
    expect(feesAtLeast({ gasPrice: gwei("8") }, { gasPrice: gwei("8") }, gwei("10"), gwei("100"))).to.deep.equal({ gasPrice: gwei("10") });
    expect(feesAtLeast({ gasPrice: gwei("8") }, { gasPrice: gwei("8") }, undefined, gwei("100"))).to.deep.equal({ gasPrice: gwei("9") });
    // Within the cap, clamped to it; a price the node would take above the cap is refused, naming both.
    expect(feesAtLeast(previous, quote, gwei("20"), gwei("21"))).to.deep.equal({ maxFeePerGas: gwei("21"), maxPriorityFeePerGas: gwei("10") });
    expect(() => feesAtLeast(previous, quote, gwei("20"), gwei("19"))).to.throw(FeeCapError, "the network asks 20 gwei per gas, above MAX_FEE_PER_GAS_GWEI (19 gwei)");
  });

  it("is what a node takes as a replacement (Hardhat asks +10 %), read from a real chain", async () => {
    const chain = await openChain("cronos-testnet");
    const relayer = privateKeyToAccount(HARDHAT_KEYS.relayer);
    await setAutomine(chain.connection.provider, false);
    const quote = await readFeeQuote(chain.publicClient);
    const block = await chain.publicClient.getBlock();
    expect(quote).to.deep.equal({ baseFeePerGas: block.baseFeePerGas, maxPriorityFeePerGas: await chain.publicClient.estimateMaxPriorityFeePerGas(), at: block.timestamp });
    const nonce = await chain.publicClient.getTransactionCount({ address: relayer.address });
    const sign = (fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }) =>
      relayer.signTransaction({ chainId: 338, to: relayer.address, value: 0n, gas: 21_000n, nonce, type: "eip1559", ...fees });
    const first = initialFees(quote, gwei("1000")) as { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };
    await chain.publicClient.sendRawTransaction({ serializedTransaction: await sign(first) });
    const replacement = replacementFees(first, quote, gwei("1000")) as typeof first;
    const raw = await sign(replacement);
    await chain.publicClient.sendRawTransaction({ serializedTransaction: raw });
    await chain.networkHelpers.mine();
    const mined = await chain.publicClient.getTransactionReceipt({ hash: keccak256(raw) });
    expect(mined.status).to.equal("success");
  });
});
