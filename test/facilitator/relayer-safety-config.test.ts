import { expect } from "chai";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { SettleError } from "../../src/protocol/reasons.js";
import { configRefusal } from "../helpers/config.js";
import { HARDHAT_KEYS, makePayment, openFacilitator } from "../helpers/facilitator.js";
import { expectFailed, FRONT_RUN, relayerNonce, settle, settleFrontRun } from "../helpers/settle.js";

const BASE = { RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: "http://127.0.0.1:8545" };

describe("relayer safety settings: MAX_SETTLE_GAS, ERC1271_GAS_LIMIT, REVERT_PENALTY_SECONDS", () => {
  it("defaults to 250,000 gas per settlement, 150,000 for the ERC-1271 check and a 600 s penalty, and reads each variable", () => {
    expect(loadConfig(BASE).relayerSafety).to.deep.equal({ maxSettleGas: 250_000n, erc1271GasLimit: 150_000n, revertPenaltySeconds: 600 });
    expect(loadConfig({ ...BASE, MAX_SETTLE_GAS: "400000", ERC1271_GAS_LIMIT: "300000", REVERT_PENALTY_SECONDS: "0" }).relayerSafety).to.deep.equal({
      maxSettleGas: 400_000n,
      erc1271GasLimit: 300_000n,
      revertPenaltySeconds: 0,
    });
  });

  it("refuses a gas limit above one transaction's cap or below a transaction's base cost, and a penalty that is not a whole number, naming the variable", () => {
    const refused = (env: Record<string, string>) => configRefusal({ ...BASE, ...env });
    expect(refused({ MAX_SETTLE_GAS: "16777217" })).to.equal('MAX_SETTLE_GAS: must be at most 16777216 (one transaction\'s gas cap), got "16777217"');
    expect(refused({ ERC1271_GAS_LIMIT: "20999" })).to.equal('ERC1271_GAS_LIMIT: must be an integer >= 21000, got "20999"');
    expect(refused({ REVERT_PENALTY_SECONDS: "ten" })).to.equal('REVERT_PENALTY_SECONDS: must be an integer >= 0, got "ten"');
  });

  /** Makes one settlement of the buyer revert on chain: the token is paused in the same block, ahead of it. */
  async function revertOnce(opened: Awaited<ReturnType<typeof openFacilitator>>) {
    const { settlement } = await settleFrontRun(opened, (await makePayment(opened.chain)).body, () => opened.chain.contract.write.pause(FRONT_RUN));
    expect(settlement.status).to.equal("reverted");
    await opened.chain.contract.write.unpause();
    return (await opened.chain.publicClient.getBlock({ blockNumber: settlement.blockNumber })).timestamp;
  }

  it("REVERT_PENALTY_SECONDS=30 refuses the payer for 30 s of the chain's clock after a revert, whatever caused it", async () => {
    const opened = await openFacilitator("cronos-testnet", { REVERT_PENALTY_SECONDS: "30" });
    const revertedAt = await revertOnce(opened);
    const next = await makePayment(opened.chain);
    const nonce = await relayerNonce(opened);
    await opened.chain.networkHelpers.time.increaseTo(revertedAt + 29n);
    expectFailed(await settle(opened, next.body), SettleError.failedOnChain);
    expect(await relayerNonce(opened)).to.equal(nonce);
    await opened.chain.networkHelpers.time.increaseTo(revertedAt + 30n);
    expect((await settle(opened, next.body)).event).to.equal("payment.settled");
  });

  it("REVERT_PENALTY_SECONDS=0 switches the penalty off: the payer's next settle is sent", async () => {
    const opened = await openFacilitator("cronos-testnet", { REVERT_PENALTY_SECONDS: "0" });
    await revertOnce(opened);
    expect((await settle(opened, (await makePayment(opened.chain)).body)).event).to.equal("payment.settled");
  });
});
