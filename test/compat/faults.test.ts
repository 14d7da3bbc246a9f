import { expect } from "chai";
import type { Address } from "viem";
import type { HarnessControl } from "../../src/harness/control/spec.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { x402Buyer } from "../../scripts/snippets/x402-buyer.js";
import { x402Seller } from "../../scripts/snippets/x402-seller.js";
import { rpc } from "../helpers/rpc.js";
import { decodeBase64Json, listen, type Listening } from "../helpers/http.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";
import { waitUntil } from "../helpers/wait.js";
import { partyBalances } from "./helpers.js";

// Every fault and time control of the harness against a seller written with @x402/express and a buyer on
// @x402/fetch (the snippets of docs/x402-packages.md, x402 v2): what such a buyer sees, and the money. Integrators on the
// @x402 packages test their failure paths with the same harness.

const PRICE = 10_000n;

/** What an @x402/fetch buyer got: the status, the v2 refusal code of PAYMENT-REQUIRED, the settle answer of PAYMENT-RESPONSE. */
interface Seen {
  status: number;
  required?: string;
  settlement?: { success: boolean; errorReason?: string; errorMessage?: string; transaction?: string };
}

describe("compat: the harness's faults against an @x402/express seller paid by @x402/fetch (x402 v2)", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  let harness: HarnessControl;
  let seller: Listening;
  let buyer: Address;
  const testnet = () => stack.networks["cronos-testnet"]!;

  /** Pays GET /weather on cronos-testnet with @x402/fetch and reads the answer's v2 headers. */
  async function pay(): Promise<Seen> {
    const response = await x402Buyer(testnet().buyers[0]!.privateKey, "eip155:338")(`${seller.url}/weather`);
    await response.text();
    const required = response.headers.get("PAYMENT-REQUIRED");
    const settlement = response.headers.get("PAYMENT-RESPONSE");
    return {
      status: response.status,
      ...(required ? { required: String(decodeBase64Json(required).error) } : {}),
      ...(settlement ? { settlement: decodeBase64Json(settlement) as Seen["settlement"] } : {}),
    };
  }
  const balances = () => partyBalances(stack, "cronos-testnet", buyer);
  /** The seller's settle failed with `errorReason` (the facilitator's v2 code): 402, nothing served, the payee not paid. */
  async function expectSettleRefused(errorReason: string, errorMessage: string) {
    const [, payee] = await balances();
    const seen = await pay();
    expect(seen).to.deep.include({ status: 402 });
    expect(seen.settlement).to.deep.include({ success: false, errorReason, errorMessage });
    expect((await balances())[1]).to.equal(payee);
  }

  before(async () => {
    // @x402/express asks the facilitator for both networks at start-up: the stack runs both.
    stack = await startTestStack({ ...STACK_OPTIONS, env: { SETTLE_TIMEOUT_SECONDS: "3", RPC_TIMEOUT_MS: "1000", RECONCILE_INTERVAL_MS: "200" } });
    harness = stack.harness;
    buyer = testnet().buyers[0]!.address;
    seller = await listen(x402Seller(stack.facilitatorUrl, stack.seller));
  });
  after(async () => {
    await seller?.close();
    await stack?.stop();
  });
  afterEach(() => harness.reset());

  it("pays without a fault (the baseline): 200, settled, the payee paid", async () => {
    const before = await balances();
    const seen = await pay();
    expect(seen.status).to.equal(200);
    expect(seen.settlement).to.deep.include({ success: true });
    expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("balance set to 0 before paying: verify refuses it, 402 with invalid_exact_evm_insufficient_balance", async () => {
    await harness.fault({ kind: "balance", address: buyer, amount: 0 });
    expect(await pay()).to.deep.equal({ status: 402, required: "invalid_exact_evm_insufficient_balance" });
  });

  it("balance gone after verify: settle refuses it, 402 with invalid_exact_evm_insufficient_balance", async () => {
    await harness.fault({ kind: "balance", address: buyer, amount: 0, trigger: "after-verify" });
    await expectSettleRefused("invalid_exact_evm_insufficient_balance", "ERC20: transfer amount exceeds balance");
  });

  it("USDC.e paused: 402 invalid_exact_evm_transaction_failed", async () => {
    await harness.fault({ kind: "pause" });
    await expectSettleRefused("invalid_exact_evm_transaction_failed", "Transaction failed on-chain");
  });

  it("the payer blacklisted: 402 invalid_exact_evm_transaction_failed", async () => {
    await harness.fault({ kind: "blacklist", address: buyer, network: "cronos-testnet" });
    await expectSettleRefused("invalid_exact_evm_transaction_failed", "Transaction failed on-chain");
  });

  it("the authorization cancelled by its payer after verify: 402 invalid_exact_evm_nonce_already_used", async () => {
    await harness.fault({ kind: "authorization", action: "cancel", trigger: "after-verify" });
    await expectSettleRefused("invalid_exact_evm_nonce_already_used", "Authorization already used");
  });

  it("the authorization submitted on chain by someone else after verify: 402 invalid_exact_evm_nonce_already_used, the payee paid once by that transaction", async () => {
    const before = await balances();
    await harness.fault({ kind: "authorization", action: "use", trigger: "after-verify" });
    const seen = await pay();
    expect(seen.status).to.equal(402);
    expect(seen.settlement).to.deep.include({ success: false, errorReason: "invalid_exact_evm_nonce_already_used" });
    expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("the facilitator's RPC refused: verify fails, 402 naming facilitator_unavailable", async () => {
    await harness.fault({ kind: "rpc", mode: "refuse" });
    expect(await pay()).to.deep.equal({ status: 402, required: "facilitator_unavailable: Service unavailable: cannot read cronos-testnet state" });
  });

  it("the facilitator's RPC refused at settle: 402 facilitator_unavailable, nothing sent", async () => {
    await harness.fault({ kind: "rpc", mode: "refuse", trigger: "after-verify" });
    await expectSettleRefused("facilitator_unavailable", "Service unavailable: cannot read cronos-testnet state");
  });

  it("the facilitator's RPC slow (100 ms a call): paid", async () => {
    await harness.fault({ kind: "rpc", mode: "delay", delayMs: 100 });
    expect((await pay()).status).to.equal(200);
  });

  it("the facilitator's RPC dropping every answer at settle: 402 facilitator_unavailable after RPC_TIMEOUT_MS", async () => {
    await harness.fault({ kind: "rpc", mode: "drop", trigger: "after-verify", forSeconds: 5 });
    await expectSettleRefused("facilitator_unavailable", "Service unavailable: cannot read cronos-testnet state");
  });

  it("the facilitator busy: @x402/express answers 402 naming the 429", async () => {
    await harness.fault({ kind: "busy", forSeconds: 10 });
    const seen = await pay();
    expect(seen.status).to.equal(402);
    expect(seen.required).to.match(/^Facilitator verify failed \(429\): \{"error":"Too many requests","retryAfter":(9|10)\}$/);
  });

  it("the facilitator busy at settle: 402 with the settle's 429, nothing paid", async () => {
    const before = await balances();
    await harness.fault({ kind: "busy", forSeconds: 10, trigger: "after-verify" });
    const seen = await pay();
    expect(seen.status).to.equal(402);
    expect(seen.settlement?.success).to.equal(false);
    expect(seen.settlement?.errorReason).to.match(/^Facilitator settle failed \(429\): /);
    expect(await balances()).to.deep.equal(before);
  });

  it("the facilitator down: 402 naming the failed fetch; up again, paid", async () => {
    const down = await harness.fault({ kind: "facilitator-down" });
    expect(await pay()).to.deep.equal({ status: 402, required: "fetch failed" });
    await down.undo();
    expect((await pay()).status).to.equal(200);
  });

  it("the facilitator restarted with the settle in flight: the buyer is not served; the new facilitator settles it from the ledger (the payee paid once)", async () => {
    const before = await balances();
    await harness.fault({ kind: "blocks", trigger: "after-verify" });
    const paying = pay();
    // The relayer's transaction waits in the pool: its pending nonce is past its committed one (a Cronos node has no pending block).
    const waiting = async () => {
      const [pending, latest] = await Promise.all(["pending", "latest"].map((tag) => rpc<string>(testnet().rpcUrl, "eth_getTransactionCount", [stack.relayer, tag])));
      return pending !== latest;
    };
    expect(await waitUntil(waiting, 10_000, 20)).to.equal(true);
    await harness.restartFacilitator();
    const seen = await paying;
    expect(seen.status).to.equal(402);
    expect(seen.settlement?.success ?? false).to.equal(false);
    await harness.resumeBlocks();
    expect(await waitUntil(async () => (await balances())[1] === before[1]! + PRICE, 15_000, 100)).to.equal(true);
    expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
  });

  it("blocks stopped for a second after verify: the settle waits, then is paid", async () => {
    await harness.fault({ kind: "blocks", forSeconds: 1, trigger: "after-verify" });
    const seen = await pay();
    expect(seen.status).to.equal(200);
    expect(seen.settlement).to.deep.include({ success: true });
  });

  it("blocks stopped past SETTLE_TIMEOUT_SECONDS: 402 invalid_exact_evm_transaction_failed; resumed, the transaction is mined and pays once", async () => {
    const before = await balances();
    await harness.fault({ kind: "blocks", trigger: "after-verify" });
    await expectSettleRefused("invalid_exact_evm_transaction_failed", "Transaction failed on-chain");
    await harness.resumeBlocks();
    expect(await waitUntil(async () => (await balances())[1] === before[1]! + PRICE, 15_000, 100)).to.equal(true);
  });

  // Last: chain time moved past @x402/fetch's validity (maxTimeoutSeconds, 300 s) expires what it signs from now on.
  it("chain time moved past validBefore after verify: 402 invalid_exact_evm_payload_authorization_valid_before", async () => {
    await harness.fault({ kind: "time", seconds: 400, trigger: "after-verify" });
    await expectSettleRefused("invalid_exact_evm_payload_authorization_valid_before", "Authorization expired");
  });
});
