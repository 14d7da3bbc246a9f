import { expect } from "chai";
import hre from "hardhat";
import {
  createWalletClient,
  decodeFunctionResult,
  encodeAbiParameters,
  encodeErrorResult,
  encodeFunctionData,
  getAddress,
  multicall3Abi,
  parseAbi,
  parseEventLogs,
  toFunctionSignature,
  zeroHash,
  type Abi,
  type AbiFunction,
  type Address,
  type Hex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { cronosTestnet } from "viem/chains";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { localAccount } from "../../src/harness/accounts.js";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { loadKitArtifact } from "../../src/harness/hardhat.js";
import { MULTICALL3_ADDRESS } from "../../src/harness/multicall3.js";
import { expectRevert } from "../helpers/revert.js";

/** Multicall3's published interface (the facts every client relies on): names, types, mutability, returns. */
const CANONICAL_ABI = parseAbi([
  "struct Call { address target; bytes callData; }",
  "struct Call3 { address target; bool allowFailure; bytes callData; }",
  "struct Call3Value { address target; bool allowFailure; uint256 value; bytes callData; }",
  "struct Result { bool success; bytes returnData; }",
  "function aggregate(Call[] calls) payable returns (uint256 blockNumber, bytes[] returnData)",
  "function aggregate3(Call3[] calls) payable returns (Result[] returnData)",
  "function aggregate3Value(Call3Value[] calls) payable returns (Result[] returnData)",
  "function blockAndAggregate(Call[] calls) payable returns (uint256 blockNumber, bytes32 blockHash, Result[] returnData)",
  "function getBasefee() view returns (uint256 basefee)",
  "function getBlockHash(uint256 blockNumber) view returns (bytes32 blockHash)",
  "function getBlockNumber() view returns (uint256 blockNumber)",
  "function getChainId() view returns (uint256 chainid)",
  "function getCurrentBlockCoinbase() view returns (address coinbase)",
  "function getCurrentBlockDifficulty() view returns (uint256 difficulty)",
  "function getCurrentBlockGasLimit() view returns (uint256 gaslimit)",
  "function getCurrentBlockTimestamp() view returns (uint256 timestamp)",
  "function getEthBalance(address addr) view returns (uint256 balance)",
  "function getLastBlockHash() view returns (bytes32 blockHash)",
  "function tryAggregate(bool requireSuccess, Call[] calls) payable returns (Result[] returnData)",
  "function tryBlockAndAggregate(bool requireSuccess, Call[] calls) payable returns (uint256 blockNumber, bytes32 blockHash, Result[] returnData)",
]);
const abi = CANONICAL_ABI;
const CALL_FAILED = "Multicall3: call failed";
const VALUE_MISMATCH = "Multicall3: value mismatch";
const NO_BALANCE = "ERC20: transfer amount exceeds balance";

/** One ABI function as a comparable line: signature, mutability and output types. */
function describeFunction(item: AbiFunction): string {
  return `${toFunctionSignature(item)} ${item.stateMutability} returns ${toFunctionSignature({ ...item, name: "", inputs: item.outputs })}`;
}

function functionsOf(items: Abi): string[] {
  return items.filter((item): item is AbiFunction => item.type === "function").map(describeFunction).sort();
}

const errorAbi = parseAbi(["error Error(string)"]);
/** The revert data of `require(false, reason)`. */
const revertData = (reason: string): Hex => encodeErrorResult({ abi: errorAbi, errorName: "Error", args: [reason] });

describe("Multicall3 at its canonical address (contracts/Multicall3.sol)", function () {
  let chain: LocalChain;
  let buyer: Address;
  let target: Address;
  let targetAbi: Abi;
  let snapshot: Hex;
  const owner = privateKeyToAccount(localAccount(0).privateKey);
  const wallet = () => createWalletClient({ account: owner, chain: cronosTestnet, transport: chain.transport });
  const rpc = <T>(method: string, params: unknown[] = []) => chain.provider.request({ method, params }) as Promise<T>;

  // Calls for the batches: two token reads, a token call that reverts (Multicall3 holds no USDC.e), and the test target.
  const tokenName = () => ({ target: chain.token, callData: encodeFunctionData({ abi: tokenAbi, functionName: "name" }) });
  const buyerBalance = () => ({ target: chain.token, callData: encodeFunctionData({ abi: tokenAbi, functionName: "balanceOf", args: [buyer] }) });
  const tokenTransfer = () => ({ target: chain.token, callData: encodeFunctionData({ abi: tokenAbi, functionName: "transfer", args: [buyer, 1n] }) });
  const targetFail = (reason: string) => ({ target, callData: encodeFunctionData({ abi: targetAbi, functionName: "fail", args: [reason] }) });
  const targetEcho = () => ({ target, callData: encodeFunctionData({ abi: targetAbi, functionName: "echo" }) });
  const encodedName = () => encodeAbiParameters([{ type: "string" }], [chain.domain.name]);
  const encodedBalance = (amount: bigint) => encodeAbiParameters([{ type: "uint256" }], [amount]);

  /** Simulates a call of Multicall3 (eth_call) from the owner and returns its result. */
  async function call(functionName: string, args: readonly unknown[] = [], value?: bigint): Promise<unknown> {
    const { result } = await chain.publicClient.simulateContract({
      address: MULTICALL3_ADDRESS,
      abi,
      functionName: functionName as never,
      args: args as never,
      account: owner,
      ...(value !== undefined ? { value } : {}),
    } as never);
    return result;
  }

  /** Sends a transaction to Multicall3 and returns the mined receipt (asserting success). */
  async function send(functionName: string, args: readonly unknown[], value = 0n) {
    const hash = await wallet().writeContract({ address: MULTICALL3_ADDRESS, abi, functionName: functionName as never, args: args as never, value } as never);
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    expect(receipt.status).to.equal("success");
    return receipt;
  }

  /** Runs `data` against Multicall3 inside a mined transaction (through CallTarget.relay) and returns the return data and the block. */
  async function inBlock(data: Hex, value = 0n) {
    const hash = await wallet().writeContract({ address: target, abi: targetAbi, functionName: "relay", args: [MULTICALL3_ADDRESS, data], value } as never);
    const receipt = await chain.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 });
    const [relayed] = parseEventLogs({ abi: targetAbi, logs: receipt.logs, eventName: "Relayed" }) as unknown as Array<{ args: { success: boolean; returnData: Hex } }>;
    const block = await chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    return { ...relayed!.args, block };
  }

  const balanceOf = async (address: Address) => chain.publicClient.getBalance({ address });

  before(async function () {
    chain = await startLocalChain({ hre, network: "cronos-testnet", port: 0, buyers: 1, buyerBalance: 7_654_321n });
    buyer = chain.buyers[0]!.address;
    const artifact = await hre.artifacts.readArtifact("CallTarget");
    targetAbi = artifact.abi as Abi;
    const hash = await wallet().deployContract({ abi: targetAbi, bytecode: artifact.bytecode as Hex });
    target = getAddress((await chain.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20 })).contractAddress!);
    snapshot = await rpc<Hex>("evm_snapshot");
  });
  afterEach(async () => {
    await rpc("evm_revert", [snapshot]);
    snapshot = await rpc<Hex>("evm_snapshot");
  });
  after(async () => {
    await chain?.stop();
  });

  it("is the compiled Multicall3, placed as runtime code at 0xcA11bde05977b3631167028862bE2a173976CA11", async () => {
    const artifact = await loadKitArtifact(hre, "Multicall3");
    expect(MULTICALL3_ADDRESS).to.equal("0xcA11bde05977b3631167028862bE2a173976CA11");
    expect(chain.multicall3Deployed).to.equal(true);
    expect(await rpc<Hex>("eth_getCode", [MULTICALL3_ADDRESS, "latest"])).to.equal(artifact.deployedBytecode);
  });

  it("has exactly Multicall3's published functions, and every function viem's multicall3Abi calls", async () => {
    const artifact = await loadKitArtifact(hre, "Multicall3");
    expect(functionsOf(artifact.abi)).to.deep.equal(functionsOf(CANONICAL_ABI));
    // viem declares its aggregate3 as view (it only eth_calls it): signatures and returns must match.
    const withoutMutability = (items: Abi) => functionsOf(items).map((line) => line.replace(/ (view|pure|payable|nonpayable) returns /, " returns "));
    for (const line of withoutMutability(multicall3Abi)) expect(withoutMutability(artifact.abi)).to.include(line);
    // No receive or fallback: plain value transfers are refused, as by the original.
    expect(artifact.abi.filter((item) => item.type === "receive" || item.type === "fallback")).to.deep.equal([]);
  });

  describe("aggregate", () => {
    it("returns the block number and each call's return data: the token's name and a buyer's balance", async () => {
      const blockNumber = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
      expect(await call("aggregate", [[tokenName(), buyerBalance()]])).to.deep.equal([blockNumber, [encodedName(), encodedBalance(7_654_321n)]]);
    });

    it("reverts with 'Multicall3: call failed' when any call reverts, whether the token or another target", async () => {
      await expectRevert(call("aggregate", [[tokenName(), tokenTransfer()]]), CALL_FAILED);
      await expectRevert(call("aggregate", [[targetFail("no"), buyerBalance()]]), CALL_FAILED);
    });

    it("is payable and keeps the value it was sent", async () => {
      await send("aggregate", [[tokenName()]], 5n);
      expect(await balanceOf(MULTICALL3_ADDRESS)).to.equal(5n);
    });
  });

  describe("tryAggregate", () => {
    it("without requireSuccess reports each outcome, with the target's own revert data for failures", async () => {
      expect(await call("tryAggregate", [false, [tokenName(), tokenTransfer(), targetFail("nope"), buyerBalance()]])).to.deep.equal([
        { success: true, returnData: encodedName() },
        { success: false, returnData: revertData(NO_BALANCE) },
        { success: false, returnData: revertData("nope") },
        { success: true, returnData: encodedBalance(7_654_321n) },
      ]);
    });

    it("with requireSuccess returns every result when all succeed and reverts with 'Multicall3: call failed' when one fails", async () => {
      expect(await call("tryAggregate", [true, [tokenName(), buyerBalance()]])).to.deep.equal([
        { success: true, returnData: encodedName() },
        { success: true, returnData: encodedBalance(7_654_321n) },
      ]);
      await expectRevert(call("tryAggregate", [true, [tokenName(), tokenTransfer()]]), CALL_FAILED);
      await expectRevert(call("tryAggregate", [true, [targetFail("nope")]]), CALL_FAILED);
    });

    it("is payable", async () => {
      expect(await call("tryAggregate", [false, [tokenName()]], 3n)).to.deep.equal([{ success: true, returnData: encodedName() }]);
    });
  });

  describe("tryBlockAndAggregate and blockAndAggregate", () => {
    it("tryBlockAndAggregate returns the block number, blockhash(block.number) (zero, as in the original) and each outcome", async () => {
      const getBlockNumber = { target: MULTICALL3_ADDRESS, callData: encodeFunctionData({ abi, functionName: "getBlockNumber" }) };
      const [blockNumber, blockHash, results] = (await call("tryBlockAndAggregate", [false, [getBlockNumber, tokenTransfer(), buyerBalance()]])) as [bigint, Hex, Array<{ success: boolean; returnData: Hex }>];
      expect(blockNumber).to.equal(await chain.publicClient.getBlockNumber({ cacheTime: 0 }));
      expect(blockHash).to.equal(zeroHash);
      expect(results).to.deep.equal([
        { success: true, returnData: encodedBalance(blockNumber) },
        { success: false, returnData: revertData(NO_BALANCE) },
        { success: true, returnData: encodedBalance(7_654_321n) },
      ]);
      await expectRevert(call("tryBlockAndAggregate", [true, [buyerBalance(), targetFail("x")]]), CALL_FAILED);
    });

    it("blockAndAggregate requires every call to succeed", async () => {
      const blockNumber = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
      expect(await call("blockAndAggregate", [[tokenName(), buyerBalance()]])).to.deep.equal([
        blockNumber,
        zeroHash,
        [
          { success: true, returnData: encodedName() },
          { success: true, returnData: encodedBalance(7_654_321n) },
        ],
      ]);
      await expectRevert(call("blockAndAggregate", [[tokenName(), tokenTransfer()]]), CALL_FAILED);
      await expectRevert(call("blockAndAggregate", [[targetFail("x")]]), CALL_FAILED);
    });

    it("both are payable", async () => {
      await send("tryBlockAndAggregate", [false, [tokenTransfer()]], 2n);
      await send("blockAndAggregate", [[tokenName()]], 3n);
      expect(await balanceOf(MULTICALL3_ADDRESS)).to.equal(5n);
    });
  });

  describe("aggregate3", () => {
    it("reports a failing call whose allowFailure is true, with its revert data, and runs the rest", async () => {
      const refuse = { target, allowFailure: true, callData: encodeFunctionData({ abi: targetAbi, functionName: "refuse", args: [42n] }) };
      const refused = encodeErrorResult({ abi: targetAbi, errorName: "Refused", args: [42n] });
      expect(
        await call("aggregate3", [
          [
            { ...tokenName(), allowFailure: false },
            { ...tokenTransfer(), allowFailure: true },
            refuse,
            { ...buyerBalance(), allowFailure: false },
          ],
        ]),
      ).to.deep.equal([
        { success: true, returnData: encodedName() },
        { success: false, returnData: revertData(NO_BALANCE) },
        { success: false, returnData: refused },
        { success: true, returnData: encodedBalance(7_654_321n) },
      ]);
    });

    it("reverts with 'Multicall3: call failed' when a call whose allowFailure is false fails", async () => {
      await expectRevert(call("aggregate3", [[{ ...tokenName(), allowFailure: true }, { ...tokenTransfer(), allowFailure: false }]]), CALL_FAILED);
      await expectRevert(call("aggregate3", [[{ ...targetFail("x"), allowFailure: false }]]), CALL_FAILED);
    });

    it("calls each target as itself, without value, and is payable", async () => {
      const [echoed] = (await call("aggregate3", [[{ ...targetEcho(), allowFailure: false }]], 9n)) as Array<{ returnData: Hex }>;
      expect(decodeFunctionResult({ abi: targetAbi, functionName: "echo", data: echoed!.returnData })).to.deep.equal([MULTICALL3_ADDRESS, 0n]);
      await send("aggregate3", [[{ ...tokenName(), allowFailure: false }]], 9n);
      expect(await balanceOf(MULTICALL3_ADDRESS)).to.equal(9n);
    });
  });

  describe("aggregate3Value", () => {
    const stranger = localAccount(17).address;

    it("sends each call its value and checks that the values add up to msg.value", async () => {
      const before = await balanceOf(stranger);
      const results = (await call(
        "aggregate3Value",
        [
          [
            { ...targetEcho(), allowFailure: false, value: 4n },
            { target: stranger, allowFailure: false, value: 6n, callData: "0x" },
            { ...tokenName(), allowFailure: false, value: 0n },
          ],
        ],
        10n,
      )) as Array<{ success: boolean; returnData: Hex }>;
      expect(decodeFunctionResult({ abi: targetAbi, functionName: "echo", data: results[0]!.returnData })).to.deep.equal([MULTICALL3_ADDRESS, 4n]);
      expect(results.slice(1)).to.deep.equal([
        { success: true, returnData: "0x" },
        { success: true, returnData: encodedName() },
      ]);
      await send("aggregate3Value", [[{ ...targetEcho(), allowFailure: false, value: 4n }, { target: stranger, allowFailure: false, value: 6n, callData: "0x" }]], 10n);
      expect(await balanceOf(target)).to.equal(4n);
      expect(await balanceOf(stranger)).to.equal(before + 6n);
      expect(await balanceOf(MULTICALL3_ADDRESS)).to.equal(0n);
    });

    it("reverts with 'Multicall3: value mismatch' when msg.value is more or less than the values", async () => {
      const calls = [{ ...targetEcho(), allowFailure: false, value: 4n }];
      await expectRevert(call("aggregate3Value", [calls], 5n), VALUE_MISMATCH);
      // Less: the call cannot be paid for (allowed to fail), and the sum still has to match.
      await expectRevert(call("aggregate3Value", [[{ ...targetEcho(), allowFailure: true, value: 4n }]], 3n), VALUE_MISMATCH);
      await expectRevert(call("aggregate3Value", [[{ ...tokenName(), allowFailure: false, value: 0n }]], 1n), VALUE_MISMATCH);
    });

    it("reverts with 'Multicall3: call failed' when a call whose allowFailure is false fails, the token refusing value included", async () => {
      await expectRevert(call("aggregate3Value", [[{ ...tokenName(), allowFailure: false, value: 1n }]], 1n), CALL_FAILED);
      await expectRevert(call("aggregate3Value", [[{ ...targetFail("x"), allowFailure: false, value: 0n }]]), CALL_FAILED);
    });

    it("counts the value of a call allowed to fail and keeps it in the contract", async () => {
      const results = (await call("aggregate3Value", [[{ ...tokenName(), allowFailure: true, value: 2n }, { ...targetEcho(), allowFailure: false, value: 1n }]], 3n)) as Array<{ success: boolean }>;
      expect(results.map((r) => r.success)).to.deep.equal([false, true]);
      await send("aggregate3Value", [[{ ...tokenName(), allowFailure: true, value: 2n }, { ...targetEcho(), allowFailure: false, value: 1n }]], 3n);
      expect(await balanceOf(MULTICALL3_ADDRESS)).to.equal(2n);
      expect(await balanceOf(target)).to.equal(1n);
    });
  });

  describe("block and account getters", () => {
    it("answer for the block they run in: number, timestamp, chain id, base fee, coinbase, gas limit, difficulty", async () => {
      const read = async (functionName: string) => {
        const { success, returnData, block } = await inBlock(encodeFunctionData({ abi, functionName: functionName as never }));
        expect(success, functionName).to.equal(true);
        return { value: decodeFunctionResult({ abi, functionName: functionName as never, data: returnData }) as unknown, block };
      };
      let r = await read("getBlockNumber");
      expect(r.value).to.equal(r.block.number);
      r = await read("getCurrentBlockTimestamp");
      expect(r.value).to.equal(r.block.timestamp);
      r = await read("getChainId");
      expect(r.value).to.equal(338n);
      r = await read("getBasefee");
      expect(r.block.baseFeePerGas! > 0n).to.equal(true);
      expect(r.value).to.equal(r.block.baseFeePerGas);
      r = await read("getCurrentBlockCoinbase");
      expect(r.value).to.equal(getAddress(r.block.miner));
      r = await read("getCurrentBlockGasLimit");
      expect(r.value).to.equal(r.block.gasLimit);
      r = await read("getCurrentBlockDifficulty");
      expect(r.value).to.equal(BigInt(r.block.mixHash));
    });

    it("getLastBlockHash and getBlockHash give the hashes of earlier blocks, zero for the current one", async () => {
      const earlier = await chain.publicClient.getBlock();
      const last = await inBlock(encodeFunctionData({ abi, functionName: "getLastBlockHash" }));
      expect(decodeFunctionResult({ abi, functionName: "getLastBlockHash", data: last.returnData })).to.equal(last.block.parentHash);
      const pinned = await chain.publicClient.readContract({ address: MULTICALL3_ADDRESS, abi, functionName: "getBlockHash", args: [earlier.number] });
      expect(pinned).to.equal(earlier.hash);
      const current = await chain.publicClient.readContract({ address: MULTICALL3_ADDRESS, abi, functionName: "getBlockHash", args: [earlier.number + 1n], blockNumber: earlier.number + 1n });
      expect(current).to.equal(zeroHash);
    });

    it("getEthBalance reads native balances, the same as eth_getBalance", async () => {
      for (const address of [buyer, MULTICALL3_ADDRESS, localAccount(40).address]) {
        expect(await chain.publicClient.readContract({ address: MULTICALL3_ADDRESS, abi, functionName: "getEthBalance", args: [address] })).to.equal(await balanceOf(address));
      }
      await wallet().sendTransaction({ to: localAccount(40).address, value: 123n });
      expect(await chain.publicClient.readContract({ address: MULTICALL3_ADDRESS, abi, functionName: "getEthBalance", args: [localAccount(40).address] })).to.equal(123n);
    });
  });

  it("refuses a plain value transfer (no receive function), as the original does", async () => {
    const error = await wallet()
      .sendTransaction({ to: MULTICALL3_ADDRESS, value: 1n })
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(error, "a plain transfer to Multicall3 should revert").to.be.instanceOf(Error);
    expect(await balanceOf(MULTICALL3_ADDRESS)).to.equal(0n);
  });
});
