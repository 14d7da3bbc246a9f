import { expect } from "chai";
import { keccak256, numberToHex, parseGwei, serializeTransaction, type Hex, type Signature, type TransactionSerializable } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { runFault } from "../../src/cli/fault.js";
import { localAccount } from "../../src/harness/accounts.js";
import type { FaultInfo } from "../../src/harness/control/spec.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { paymentRequirements } from "../../src/seller/index.js";
import { rpcClient, writeToken } from "../helpers/chain.js";
import { postJson } from "../helpers/http.js";
import { rpc, type WireResponse } from "../helpers/rpc.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";

// The Cronos node's faults (what a real endpoint does), over the control endpoint's HTTP and the CLI, on a
// stack whose chains answer as a Cronos node (the default). Senders are Hardhat's funded accounts #10 to #19.

const GWEI = parseGwei("1");
const sender = (index: number) => privateKeyToAccount(localAccount(index).privateKey);
function transfer(index: number, nonce: number, fees: { tip?: bigint; cap?: bigint } = {}): Promise<Hex> {
  const account = sender(index);
  return account.signTransaction({ chainId: 338, type: "eip1559", to: account.address, value: 1n, gas: 21_000n, nonce, maxPriorityFeePerGas: fees.tip ?? GWEI, maxFeePerGas: fees.cap ?? 3n * GWEI });
}

describe("a Cronos node's faults on demand: a lagging backend, a lost mempool, a raised minimum fee, replacement off (src/harness/control/node-faults.ts)", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  const url = () => stack.networks["cronos-testnet"]!.rpcUrl;
  const send = async (raw: Hex) => (await postJson(url(), { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] })).json as WireResponse;
  const count = async (index: number, tag: string) => Number(BigInt(await rpc<Hex>(url(), "eth_getTransactionCount", [sender(index).address, tag])));
  const head = async () => BigInt(await rpc<Hex>(url(), "eth_blockNumber"));
  /** The control endpoint, as curl speaks to it. */
  const control = async (method: "POST" | "DELETE" | "GET", path: string, body?: unknown) => {
    const response = await fetch(`${stack.harnessUrl}${path}`, { method, ...(body ? { headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {}) });
    return { status: response.status, json: (await response.json()) as FaultInfo & { error?: string } };
  };
  /** `cronos-x402 fault …` in this process, against this stack. */
  const cli = async (argv: string[]) => {
    let stdout = "";
    let stderr = "";
    const code = await runFault([...argv, "--url", stack.harnessUrl], { stdout: (text) => void (stdout += text), stderr: (text) => void (stderr += text) });
    return { code, stdout, stderr };
  };

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 1 });
  });
  after(() => stack?.stop());
  afterEach(() => stack.harness.reset());

  it("lagging-backend (HTTP): logs only up to N blocks below the head ([] above it, by blockHash too), the next correct send refused once with the nonce there; undone, both whole again", async () => {
    expect((await send(await transfer(10, 0))).result).to.equal(keccak256(await transfer(10, 0)));
    const buyer = stack.networks["cronos-testnet"]!.buyers[0]!;
    const moved = await writeToken("cronos-testnet", url(), stack.networks["cronos-testnet"]!.token, buyer.privateKey, "transfer", [sender(11).address, 1n]);
    const top = await head();
    expect(moved.blockNumber).to.equal(top);
    const made = await control("POST", "/faults", { kind: "lagging-backend", blocks: 3, network: "cronos-testnet" });
    expect(made.status).to.equal(201);
    expect(made.json).to.deep.include({ kind: "lagging-backend", state: "active", spec: { kind: "lagging-backend", blocks: 3, refusals: 1, network: "cronos-testnet", trigger: "now" } });
    const token = stack.networks["cronos-testnet"]!.token;
    const recent = [{ fromBlock: numberToHex(top - 10n), toBlock: "latest", address: token }];
    const whole = (await stack.chains["cronos-testnet"]!.provider.request({ method: "eth_getLogs", params: recent })) as Array<{ blockNumber: Hex }>;
    expect(whole.at(-1)!.blockNumber).to.equal(numberToHex(top));
    // The transfer is in the head block, above the backend's: no error, the logs up to its head only.
    expect(await rpc<unknown[]>(url(), "eth_getLogs", recent)).to.deep.equal(whole.filter((log) => BigInt(log.blockNumber) <= top - 3n));
    expect(await rpc(url(), "eth_getLogs", [{ fromBlock: numberToHex(top - 1n), address: token }])).to.deep.equal([]);
    expect(await rpc(url(), "eth_getLogs", [{ blockHash: moved.blockHash }])).to.deep.equal([]);
    // Nonce 1 is right (0 is mined), but the backend's state is 3 blocks back, before it.
    const next = await transfer(10, 1);
    expect((await send(next)).error).to.deep.equal({ code: -32000, message: "invalid nonce; got 1, expected 0: invalid sequence: invalid sequence" });
    expect((await control("GET", `/faults/${made.json.id}`)).json).to.deep.include({ refusalsLeft: 0 });
    expect((await send(next)).result).to.equal(keccak256(next));
    expect((await control("DELETE", `/faults/${made.json.id}`)).json).to.deep.include({ state: "ended" });
    expect(await rpc<unknown[]>(url(), "eth_getLogs", [{ blockHash: moved.blockHash }])).to.have.length(1);
  });

  it("mempool-lost (CLI): the pending transactions dropped as by a restart, named in the fault; an identical re-send is admitted anew; nothing to undo", async () => {
    const blocks = await stack.harness.stopBlocks();
    const raw = await transfer(12, 0);
    expect((await send(raw)).result).to.equal(keccak256(raw));
    expect(await count(12, "pending")).to.equal(1);
    const lost = await cli(["mempool-lost", "--json"]);
    expect(lost.code, lost.stderr).to.equal(0);
    const info = JSON.parse(lost.stdout) as FaultInfo;
    expect(info).to.deep.include({ kind: "mempool-lost", state: "ended", dropped: [keccak256(raw)] });
    expect(await count(12, "pending")).to.equal(0);
    expect(await stack.chains["cronos-testnet"]!.provider.request({ method: "eth_pendingTransactions", params: [] })).to.deep.equal([]);
    // The node's cache went with it: the same bytes are new to it.
    expect((await send(raw)).result).to.equal(keccak256(raw));
    await blocks.undo();
    expect(await rpc(url(), "eth_getTransactionReceipt", [keccak256(raw)])).to.include({ status: "0x1" });
    expect(await cli(["undo", info.id])).to.deep.include({ code: 0 });
    expect((await cli(["list"])).stdout).to.contain(`${info.id}\tended\tmempool-lost\tthe node's mempool lost, as a restart: its pending transactions dropped (1 transaction(s) dropped)\n`);
  });

  it("min-fee (CLI --gwei): a fee under it refused with the minimum-fee text, the head's base fee raised to it; undone, the same transaction is admitted", async () => {
    const made = await cli(["min-fee", "--gwei", "2", "--json"]);
    expect(made.code, made.stderr).to.equal(0);
    const info = JSON.parse(made.stdout) as FaultInfo;
    expect(info.spec).to.deep.equal({ kind: "min-fee", minGasPrice: "2000000000", trigger: "now" });
    expect((await rpc<{ baseFeePerGas: Hex }>(url(), "eth_getBlockByNumber", ["latest", false])).baseFeePerGas).to.equal(numberToHex(2n * GWEI));
    const raw = await transfer(13, 0, { cap: (3n * GWEI) / 2n });
    expect((await send(raw)).error).to.deep.equal({
      code: -32000,
      message:
        "provided fee < minimum global fee (31500000000000 < 42000000000000). Please increase the priority tip (for EIP-1559 txs) or the gas prices (for access list or legacy txs): insufficient fee",
    });
    expect(await cli(["undo", info.id])).to.deep.include({ code: 0 });
    // The base fee falls back by itself, 12.5 % a block.
    for (let i = 0; i < 3; i++) await rpc(url(), "evm_mine");
    expect((await send(raw)).result).to.equal(keccak256(raw));
  });

  it("no-replacement (HTTP): a properly bumped replacement is answered invalid nonce; undone, it replaces", async () => {
    const blocks = await stack.harness.stopBlocks();
    await send(await transfer(14, 0));
    const made = await control("POST", "/faults", { kind: "no-replacement" });
    expect(made.json).to.deep.include({ kind: "no-replacement", state: "active", description: "transaction replacement turned off: a same-nonce transaction answered invalid nonce" });
    const bumped = await transfer(14, 0, { tip: 2n * GWEI, cap: 4n * GWEI });
    expect((await send(bumped)).error).to.deep.equal({ code: -32000, message: "invalid nonce; got 0, expected 1: invalid sequence: invalid sequence" });
    await control("DELETE", `/faults/${made.json.id}`);
    expect((await send(bumped)).result).to.equal(keccak256(bumped));
    await blocks.undo();
    expect(await rpc(url(), "eth_getTransactionReceipt", [keccak256(bumped)])).to.include({ status: "0x1" });
  });

  it("the stack's facilitator reaches its chain through the node: its settlement transaction is in the node's cache (an identical re-send is `tx already in mempool`)", async () => {
    const requirements = paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: 10_000n });
    const paymentHeader = await createPaymentHeader({ signer: privateKeyToAccount(stack.networks["cronos-testnet"]!.buyers[0]!.privateKey), requirements });
    const settled = await postJson(`${stack.facilitatorUrl}/v2/x402/settle`, { x402Version: 1, paymentHeader, paymentRequirements: requirements });
    expect(settled.json, JSON.stringify(settled.json)).to.include({ event: "payment.settled" });
    const tx = await rpcClient(url()).getTransaction({ hash: settled.json.txHash });
    const raw = serializeTransaction({ ...tx, data: tx.input } as TransactionSerializable, { r: tx.r, s: tx.s, v: tx.v, yParity: tx.yParity } as Signature);
    expect(keccak256(raw), JSON.stringify(tx, (_key, value: unknown) => (typeof value === "bigint" ? String(value) : value))).to.equal(settled.json.txHash);
    // Mined, so EDR alone would answer a nonce too low; the node's cache knows the bytes.
    expect((await send(raw)).error).to.deep.equal({ code: -32000, message: "tx already in mempool" });
  });

  it("each node fault kind maps to its spec from the CLI (its options, --network, --for-seconds, --after-verify), and is undone by its id", async () => {
    const spec = async (argv: string[]) => {
      const made = await cli([...argv, "--json"]);
      expect(made.code, made.stderr).to.equal(0);
      const info = JSON.parse(made.stdout) as FaultInfo;
      expect((await cli(["undo", info.id, "--json"])).code).to.equal(0);
      return info.spec;
    };
    expect(await spec(["lagging-backend", "--blocks", "5", "--refusals", "2", "--network", "testnet"])).to.deep.equal({ kind: "lagging-backend", blocks: 5, refusals: 2, network: "cronos-testnet", trigger: "now" });
    expect(await spec(["lagging-backend", "--for-seconds", "30"])).to.deep.equal({ kind: "lagging-backend", blocks: 60, refusals: 1, forSeconds: 30, trigger: "now" });
    expect(await spec(["min-fee", "--gwei", "0.5", "--after-verify"])).to.deep.equal({ kind: "min-fee", minGasPrice: "500000000", trigger: "after-verify" });
    expect(await spec(["no-replacement", "--for-seconds", "30"])).to.deep.equal({ kind: "no-replacement", forSeconds: 30, trigger: "now" });
    expect(await spec(["mempool-lost", "--after-verify"])).to.deep.equal({ kind: "mempool-lost", trigger: "after-verify" });
    expect(stack.chains["cronos-testnet"]!.cronosNode!.settings).to.deep.include({ minGasPrice: 0n, replacement: true });
    expect(stack.chains["cronos-testnet"]!.cronosNode!.lagBlocks).to.equal(0);
  });

  it("refuses a malformed node fault with one line naming the field (400), changing nothing", async () => {
    const before = (await stack.harness.faults()).length;
    expect(await control("POST", "/faults", { kind: "lagging-backend", blocks: 0 })).to.deep.include({ status: 400, json: { error: "blocks must be from 1 to 1000000" } });
    expect(await control("POST", "/faults", { kind: "min-fee" })).to.deep.include({ status: 400 });
    expect(await control("POST", "/faults", { kind: "min-fee", minGasPrice: "-1" })).to.deep.include({ status: 400 });
    expect(await cli(["min-fee", "--gwei", "ten"])).to.deep.include({ code: 2 });
    expect(await stack.harness.faults()).to.have.length(before);
    expect(stack.chains["cronos-testnet"]!.cronosNode!.settings).to.deep.include({ minGasPrice: 0n, replacement: true });
  });
});

describe("a Cronos node's faults on a stack whose chains answer as EDR alone (node ethereum)", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 0, node: "ethereum" });
  });
  after(() => stack?.stop());

  it("are refused 409 naming the option, nothing held", async () => {
    for (const kind of ["lagging-backend", "mempool-lost", "min-fee", "no-replacement"]) {
      const response = await fetch(`${stack.harnessUrl}/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ kind, ...(kind === "min-fee" ? { minGasPrice: "1" } : {}) }) });
      expect(response.status, kind).to.equal(409);
      expect(await response.json()).to.deep.equal({ error: `cronos-testnet: the chain answers as EDR alone (node "ethereum"): a ${kind} fault is a Cronos node's; start it with node "cronos"` });
    }
    expect((await stack.harness.faults()).filter((fault) => fault.state !== "ended")).to.deep.equal([]);
  });
});
