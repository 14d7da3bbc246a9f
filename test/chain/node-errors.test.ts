import { expect } from "chai";
import { HttpRequestError, parseGwei, RpcRequestError, TimeoutError, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { classifySendError, leastFeePerGas, nodeErrorText, SEND_REFUSALS, type NodeFamily, type SendErrorClass } from "../../src/chain/node-errors.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { setAutomine } from "../helpers/mining.js";
import { openChain } from "../helpers/token.js";

/**
 * Every refusal text the relayer knows, verbatim, with where it comes from. Cronos texts are the node's format
 * strings (ethermint, cosmos-sdk, CometBFT: numbers filled in) with the suffix the SDK appends (`: <registered
 * error>`); the RPC wraps the check's answer once more, hence texts with the suffix twice. EDR texts are what
 * Hardhat's EDR 0.22.0 of this project answered (the live part below provokes each one again).
 */
const TEXTS: ReadonlyArray<{ node: NodeFamily; source: string; text: string; means: SendErrorClass }> = [
  // Cronos EVM (v1.7: ethermint ante handler, cosmos-sdk mempool, CometBFT)
  { node: "cronos", source: "ethermint app/ante/eth.go, as checked (a gap: the node never queues)", text: "invalid nonce; got 1, expected 0: invalid sequence", means: { kind: "nonceAhead", expected: 0 } },
  { node: "cronos", source: "ethermint app/ante/eth.go through rpc/backend/call_tx.go (ABCIError wraps it again)", text: "invalid nonce; got 1, expected 0: invalid sequence: invalid sequence", means: { kind: "nonceAhead", expected: 0 } },
  { node: "cronos", source: "cronos#1839: the node's check state ahead of latest", text: "invalid nonce; got 18, expected 32: invalid sequence: invalid sequence", means: { kind: "nonceBehind", expected: 32 } },
  { node: "cronos", source: "cronos test_app_mempool.py: replacement disabled, same nonce", text: "invalid nonce; got 5, expected 6: invalid sequence", means: { kind: "nonceBehind", expected: 6 } },
  { node: "cronos", source: "cosmos-sdk ErrTxInMempoolCache (CometBFT ErrTxInCache); cronos test_basic.py", text: "tx already in mempool", means: { kind: "known" } },
  { node: "cronos", source: "cosmos-sdk ErrTxInMempoolCache through ABCIError (empty log)", text: ": tx already in mempool", means: { kind: "known" } },
  {
    node: "cronos",
    source: "cosmos-sdk types/mempool/priority_nonce.go (Cronos TxReplacement, feebump 10); cronos test_mempool.py",
    text: "tx doesn't fit the replacement rule, oldPriority: 1000, newPriority: 1050, oldTx: &{0xc001f2a000}, newTx: &{0xc001f2a1e0}",
    means: { kind: "replacementRefused" },
  },
  {
    node: "cronos",
    source: "ethermint app/ante/fees.go CheckEthMinGasPrice (10,000 gwei × 100,000 gas)",
    text: "provided fee < minimum global fee (500000000000000000.000000000000000000 < 1000000000000000000.000000000000000000). Please increase the priority tip (for EIP-1559 txs) or the gas prices (for access list or legacy txs): insufficient fee",
    means: { kind: "feeTooLow", atLeast: { totalWei: 1_000_000_000_000_000_000n } },
  },
  {
    node: "cronos",
    source: "ethermint app/ante/eth.go CheckEthCanTransfer (mainnet's 2024 base fee)",
    text: "max fee per gas less than block base fee (9000000000000 < 10019000000000): insufficient fee",
    means: { kind: "feeTooLow", atLeast: { perGasWei: 10_019_000_000_000n } },
  },
  { node: "cronos", source: "ethermint app/ante/fee_checker.go (cosmos transactions' fee checker)", text: "insufficient gas prices; got: 5000000000000 required: 10000000000000: insufficient fee", means: { kind: "feeTooLow" } },
  {
    node: "cronos",
    source: "ethermint app/ante/fees.go MinGasPriceDecorator (a cosmos transaction's fee in coins)",
    text: "provided fee < minimum global fee (1000basetcro < 2100000000000000basetcro). Please increase the gas price.: insufficient fee",
    means: { kind: "feeTooLow" },
  },
  { node: "cronos", source: "cosmos-sdk ErrMempoolIsFull", text: "mempool is full", means: { kind: "poolFull" } },
  { node: "cronos", source: "CometBFT mempool ErrMempoolIsFull", text: "mempool is full: number of txs 5000 (max: 5000), total txs bytes 1073741824 (max: 1073741824)", means: { kind: "poolFull" } },
  { node: "cronos", source: "ethermint x/evm/keeper/utils.go CheckSenderBalance", text: "sender balance < tx cost (1000 < 2100000000000000000): insufficient funds", means: { kind: "fundsLow" } },
  { node: "cronos", source: "ethermint x/evm/keeper/utils.go CheckEthGasConsume; cronos test_basic.py (gas 1)", text: "gas limit too low: 1 (gas limit) < 21000 (intrinsic gas): out of gas", means: { kind: "invalid" } },
  { node: "cronos", source: "ethermint app/ante/eth.go CheckEthGasConsume", text: "tx gas (50000000) exceeds block gas limit (30000000): out of gas", means: { kind: "invalid" } },
  { node: "cronos", source: "ethermint rpc/backend/call_tx.go SendRawTransaction", text: "only replay-protected (EIP-155) transactions allowed over RPC", means: { kind: "invalid" } },
  // go-ethereum (master 02b73d4; older where said)
  { node: "geth", source: "core/txpool/errors.go ErrAlreadyKnown", text: "already known", means: { kind: "known" } },
  { node: "geth", source: "core/tx_pool.go before 1.9.3", text: "known transaction: 9c22ff5f21f0b81b113e63f7db6da94fedef11b2119b4088b89664fb9a3cb658", means: { kind: "known" } },
  { node: "geth", source: "core/txpool/validation.go ValidateTransactionWithState", text: "nonce too low: next nonce 5, tx nonce 3", means: { kind: "nonceBehind", expected: 5 } },
  { node: "geth", source: "core/error.go ErrNonceTooLow (bare, older pools and other clients)", text: "nonce too low", means: { kind: "nonceBehind" } },
  { node: "geth", source: "core/txpool/validation.go (pools that refuse gaps)", text: "nonce too high: tx nonce 7, gapped nonce 5", means: { kind: "nonceAhead", expected: 5 } },
  { node: "geth", source: "core/error.go ErrNonceTooHigh", text: "nonce too high", means: { kind: "nonceAhead" } },
  { node: "geth", source: "core/txpool/errors.go ErrReplaceUnderpriced", text: "replacement transaction underpriced", means: { kind: "replacementRefused" } },
  { node: "geth", source: "core/txpool/errors.go ErrFutureReplacePending", text: "future transaction tries to replace pending", means: { kind: "replacementRefused" } },
  { node: "geth", source: "core/txpool/errors.go ErrUnderpriced", text: "transaction underpriced", means: { kind: "feeTooLow" } },
  { node: "geth", source: "core/txpool/validation.go ErrTxGasPriceTooLow", text: "transaction gas price below minimum: gas tip cap 1, minimum needed 1000000", means: { kind: "feeTooLow" } },
  {
    node: "geth",
    source: "core/state_transition.go ErrFeeCapTooLow",
    text: "max fee per gas less than block base fee: address 0x70997970C51812dc3A010C7d01b50e0d17dc79C8, maxFeePerGas: 1000, baseFee: 7000000",
    means: { kind: "feeTooLow", atLeast: { perGasWei: 7_000_000n } },
  },
  { node: "geth", source: "core/error.go ErrFeeCapTooLow (1.10.4 to 1.10.7)", text: "fee cap less than block base fee", means: { kind: "feeTooLow" } },
  { node: "geth", source: "core/txpool/legacypool/legacypool.go ErrTxPoolOverflow", text: "txpool is full", means: { kind: "poolFull" } },
  { node: "geth", source: "core/txpool/validation.go ErrAccountLimitExceeded", text: "account limit exceeded: pooled 16 txs", means: { kind: "poolFull" } },
  { node: "geth", source: "core/txpool/validation.go ErrInsufficientFunds", text: "insufficient funds for gas * price + value: balance 0, tx cost 21000000000000, overshot 21000000000000", means: { kind: "fundsLow" } },
  { node: "geth", source: "core/error.go ErrInsufficientFundsForTransfer", text: "insufficient funds for transfer", means: { kind: "fundsLow" } },
  { node: "geth", source: "core/txpool/validation.go ErrIntrinsicGas", text: "intrinsic gas too low: gas 100, minimum needed 21000", means: { kind: "invalid" } },
  { node: "geth", source: "core/txpool/errors.go ErrGasLimit", text: "exceeds block gas limit", means: { kind: "invalid" } },
  { node: "geth", source: "core/txpool/validation.go ErrGasLimitTooHigh (Osaka)", text: "transaction gas limit too high (cap: 16777216, tx: 30000000)", means: { kind: "invalid" } },
  { node: "geth", source: "core/error.go ErrTipAboveFeeCap", text: "max priority fee per gas higher than max fee per gas", means: { kind: "invalid" } },
  { node: "geth", source: "core/txpool/validation.go ErrOversizedData", text: "oversized data: transaction size 131073, limit 131072", means: { kind: "invalid" } },
  { node: "geth", source: "core/txpool/validation.go ErrInvalidSender", text: "invalid sender: invalid chain id for signer", means: { kind: "invalid" } },
  // Hardhat EDR 0.22.0 (answered by this project's local chain)
  { node: "edr", source: "EDR eth_sendRawTransaction, automining", text: "Nonce too low. Expected nonce to be 1 but got 0. Note that transactions can't be queued when automining.", means: { kind: "nonceBehind", expected: 1 } },
  { node: "edr", source: "EDR eth_sendRawTransaction, automining", text: "Nonce too high. Expected nonce to be 1 but got 5. Note that transactions can't be queued when automining.", means: { kind: "nonceAhead", expected: 1 } },
  { node: "edr", source: "EDR eth_sendRawTransaction", text: "Known transaction: 0xff44f2a53f7f8f36498e8818e56e684b285a0c4d64653e23df57742f84eb894d", means: { kind: "known" } },
  {
    node: "edr",
    source: "EDR eth_sendRawTransaction",
    text: "Replacement transaction underpriced. A gasPrice/maxFeePerGas of at least 22000000000 is necessary to replace the existing transaction with nonce 1.",
    means: { kind: "replacementRefused" },
  },
  {
    node: "edr",
    source: "EDR eth_sendRawTransaction, automining",
    text: "Transaction maxFeePerGas (1) is too low for the next block, which has a baseFeePerGas of 393621797",
    means: { kind: "feeTooLow", atLeast: { perGasWei: 393_621_797n } },
  },
  {
    node: "edr",
    source: "EDR eth_sendRawTransaction",
    text: "Sender doesn't have enough funds to send tx. The max upfront cost is: 1000000000000000420000000000000 and the sender's balance is: 9999999969554021479000.",
    means: { kind: "fundsLow" },
  },
  { node: "edr", source: "EDR eth_sendRawTransaction", text: "Transaction requires at least 21000 gas but got 100", means: { kind: "invalid" } },
  { node: "edr", source: "EDR eth_sendRawTransaction", text: "Transaction gas limit is 100000000000 and exceeds transaction gas cap of 16777216", means: { kind: "invalid" } },
];

/** The node's answer as viem gives it to the relayer: a JSON-RPC error (code -32000) over HTTP. */
function rpcError(message: string, code = -32000): RpcRequestError {
  return new RpcRequestError({ body: { method: "eth_sendRawTransaction", params: ["0x02f8"] }, error: { code, message }, url: "http://127.0.0.1:8545" });
}

describe("node errors: the one table of what a refusal means (Cronos, geth, EDR)", () => {
  for (const { node, source, text, means } of TEXTS) {
    it(`${node}: "${text.length > 70 ? `${text.slice(0, 67)}...` : text}" → ${means.kind} (${source})`, () => {
      expect(classifySendError(rpcError(text))).to.deep.equal(means);
      // The same text as a plain error (a transport that gives the node's words as its message).
      expect(classifySendError(new Error(text))).to.deep.equal(means);
    });
  }

  it("every row of the table is the first match of at least one real text above", () => {
    const used = new Set(TEXTS.map(({ text }) => SEND_REFUSALS.findIndex((rule) => rule.text.test(text))));
    const unused = SEND_REFUSALS.map((rule, index) => (used.has(index) ? undefined : rule.source)).filter((source) => source !== undefined);
    expect(unused).to.deep.equal([]);
  });

  it("reads a transport fault, a time-out and a text no node is known to give as unknown (the node may hold the transaction)", () => {
    expect(classifySendError(new HttpRequestError({ url: "http://127.0.0.1:8545", status: 502, details: "Bad Gateway" }))).to.deep.equal({ kind: "unknown" });
    expect(classifySendError(new TimeoutError({ body: {}, url: "http://127.0.0.1:8545" }))).to.deep.equal({ kind: "unknown" });
    expect(classifySendError(rpcError("internal error"))).to.deep.equal({ kind: "unknown" });
    // viem's own words for -32000 ("Missing or invalid parameters") are not a refusal.
    expect(classifySendError(rpcError("something the table does not know"))).to.deep.equal({ kind: "unknown" });
    expect(classifySendError(undefined)).to.deep.equal({ kind: "unknown" });
  });

  it("reads the node's words through every cause viem wraps them in", () => {
    const wrapped = new Error("send failed", { cause: rpcError("tx already in mempool") });
    expect(nodeErrorText(wrapped)).to.include("tx already in mempool");
    expect(classifySendError(wrapped)).to.deep.equal({ kind: "known" });
  });

  it("turns a refused fee into a price per gas: as named, or Cronos's fee for the whole gas limit divided by it (rounded up)", () => {
    expect(leastFeePerGas({ perGasWei: 7n }, 21_000n)).to.equal(7n);
    expect(leastFeePerGas({ totalWei: 1_000_000_000_000_000_000n }, 100_000n)).to.equal(parseGwei("10000"));
    expect(leastFeePerGas({ totalWei: 10n }, 3n)).to.equal(4n);
    expect(leastFeePerGas(undefined, 21_000n)).to.equal(undefined);
  });

  describe("EDR's own answers, provoked on the local chain", function () {
    this.timeout(60_000);
    const account = privateKeyToAccount(HARDHAT_KEYS.secondRelayer);

    it("reads each refusal EDR gives as the table says (through viem, as the relayer gets it)", async () => {
      const chain = await openChain("cronos-testnet");
      const client = chain.publicClient;
      const base = (await client.getBlock()).baseFeePerGas!;
      const send = async (tx: { nonce: number; gas?: bigint; value?: bigint; maxFeePerGas?: bigint }) => {
        const raw = await account.signTransaction({
          chainId: 338,
          to: account.address,
          type: "eip1559",
          gas: tx.gas ?? 21_000n,
          nonce: tx.nonce,
          maxFeePerGas: tx.maxFeePerGas ?? base * 4n,
          maxPriorityFeePerGas: tx.maxFeePerGas === undefined ? 1n : 0n,
          ...(tx.value !== undefined ? { value: tx.value } : {}),
        });
        return client.sendRawTransaction({ serializedTransaction: raw }).then(
          (hash): SendErrorClass | Hex => hash,
          (error: unknown) => classifySendError(error),
        );
      };
      expect(await send({ nonce: 0 })).to.match(/^0x[0-9a-f]{64}$/);
      expect(await send({ nonce: 0, value: 1n })).to.deep.equal({ kind: "nonceBehind", expected: 1 });
      expect(await send({ nonce: 5 })).to.deep.equal({ kind: "nonceAhead", expected: 1 });
      expect(await send({ nonce: 1, gas: 100n })).to.deep.equal({ kind: "invalid" });
      expect(await send({ nonce: 1, gas: 100_000_000_000n })).to.deep.equal({ kind: "invalid" });
      expect(await send({ nonce: 1, value: 10n ** 30n })).to.deep.equal({ kind: "fundsLow" });
      const low = await send({ nonce: 1, maxFeePerGas: 1n });
      expect(low).to.have.property("kind", "feeTooLow");
      expect((low as { atLeast?: { perGasWei?: bigint } }).atLeast?.perGasWei).to.be.a("bigint");
      // With automining off, the pool holds transactions: the same one again, then one under-bid at its nonce.
      await setAutomine(chain.connection.provider, false);
      const raw = await account.signTransaction({ chainId: 338, to: account.address, type: "eip1559", gas: 21_000n, nonce: 1, maxFeePerGas: base * 4n, maxPriorityFeePerGas: 1n });
      await client.sendRawTransaction({ serializedTransaction: raw });
      expect(await client.sendRawTransaction({ serializedTransaction: raw }).catch((error: unknown) => classifySendError(error))).to.deep.equal({ kind: "known" });
      expect(await send({ nonce: 1, value: 2n, maxFeePerGas: base * 4n + 1n })).to.deep.equal({ kind: "replacementRefused" });
    });
  });
});
