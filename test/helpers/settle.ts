import { expect } from "chai";
import request from "supertest";
import { parseGwei, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { withoutAutomine } from "./mining.js";
import { withoutTimestamp } from "./time.js";
import { waitUntil, WAIT_MS } from "./wait.js";
import { HARDHAT_KEYS, type openFacilitator } from "./facilitator.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

/** A settle answer as JSON. */
export type SettleAnswer = Record<string, unknown> & { event: string; txHash?: Hex };

/** The relayer of {@link openFacilitator} (Hardhat's PUBLIC test key #9, LOCAL-ONLY). */
export const RELAYER = privateKeyToAccount(HARDHAT_KEYS.relayer).address;

/** The relayer's next nonce, counting transactions in the mempool: it moves only when something is sent. */
export function relayerNonce(opened: Opened): Promise<number> {
  return opened.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
}

/** POSTs a settle and asserts the status is 200 (every protocol outcome is). */
export async function settle(opened: Opened, body: object): Promise<SettleAnswer> {
  const response = await request(opened.app).post("/v2/x402/settle").set("X402-Version", "1").send(body);
  expect(response.status, JSON.stringify(response.body)).to.equal(200);
  return response.body as SettleAnswer;
}

/** Asserts a `payment.failed` answer on cronos-testnet with exactly `error` (and the given extra fields). */
export function expectFailed(answer: Record<string, unknown>, error: string, extra: Record<string, unknown> = {}): void {
  expect(withoutTimestamp(answer)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error, ...extra });
}

/** An attacker's fees: its transaction is mined before the relayer's in the same block; its own gas limit (no estimate against the pending block). */
export const FRONT_RUN = { maxPriorityFeePerGas: parseGwei("500"), maxFeePerGas: parseGwei("1000"), gas: 200_000n } as const;

/**
 * Starts a settle with automine off, waits until its transaction is in the mempool, lets `frontRun`
 * send the attacker's transaction (with {@link FRONT_RUN} fees), and mines both in one block.
 * Asserts the attacker's transaction went first and succeeded; returns the answer, the settlement's receipt and the attacker's.
 */
export async function settleFrontRun(opened: Opened, body: object, frontRun: () => Promise<Hex>) {
  const { chain } = opened;
  const nonce = await relayerNonce(opened);
  return withoutAutomine(chain.connection.provider, async () => {
    const settling = settle(opened, body);
    await waitUntil("the settlement in the mempool", async () => (await relayerNonce(opened)) === nonce + 1, WAIT_MS, 10);
    const attack = await frontRun();
    await chain.networkHelpers.mine();
    const answer = await settling;
    const attacker = await chain.publicClient.getTransactionReceipt({ hash: attack });
    // The relayer's transaction, from the block (an answer may name none).
    const block = await chain.publicClient.getBlock({ blockNumber: attacker.blockNumber, includeTransactions: true });
    const ours = block.transactions.find((tx) => tx.from.toLowerCase() === RELAYER.toLowerCase());
    expect(ours, "the relayer's transaction in the attacker's block").to.not.equal(undefined);
    const settlement = await chain.publicClient.getTransactionReceipt({ hash: ours!.hash });
    expect(attacker.status).to.equal("success");
    expect(attacker.blockNumber).to.equal(settlement.blockNumber);
    expect(attacker.transactionIndex).to.be.below(settlement.transactionIndex);
    return { answer, settlement, attacker };
  });
}

/** The gas counted in `x402_settle_reverted_gas_total` for cronos-testnet. */
export async function revertedGas(opened: Opened): Promise<number> {
  const metric = opened.facilitator.metrics.registry.getSingleMetric("x402_settle_reverted_gas_total");
  const values = (await metric!.get()).values.filter((v) => v.labels.network === "cronos-testnet");
  return values.reduce((sum, v) => sum + v.value, 0);
}
