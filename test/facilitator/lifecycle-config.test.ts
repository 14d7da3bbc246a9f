import { expect } from "chai";
import { parseGwei } from "viem";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { configRefusal } from "../helpers/config.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";

// What the settings do is proven by the fault suite (settlement-faults.test.ts); here, how they are read.

const BASE = { RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: "http://127.0.0.1:8545" };

const refused = (env: Record<string, string>) => configRefusal({ ...BASE, ...env });

describe("transaction lifecycle settings: MAX_FEE_PER_GAS_GWEI, REPLACE_AFTER_SECONDS", () => {
  it("defaults to a 10,000 gwei cap and replacement after 3 s of chain time, and reads each variable (gwei with decimals)", () => {
    expect(loadConfig(BASE).lifecycle).to.deep.equal({ maxFeePerGasWei: parseGwei("10000"), replaceAfterSeconds: 3 });
    expect(loadConfig({ ...BASE, MAX_FEE_PER_GAS_GWEI: "0.5", REPLACE_AFTER_SECONDS: "12" }).lifecycle).to.deep.equal({
      maxFeePerGasWei: 500_000_000n,
      replaceAfterSeconds: 12,
    });
    expect(loadConfig({ ...BASE, MAX_FEE_PER_GAS_GWEI: "7500.000000001" }).lifecycle.maxFeePerGasWei).to.equal(7_500_000_000_001n);
  });

  it("refuses a cap that is zero, negative, not a number or finer than a wei, and a replacement delay under 1 s, naming the variable", () => {
    for (const value of ["0", "-1", "ten", "1e3", "0.0000000001"]) {
      expect(refused({ MAX_FEE_PER_GAS_GWEI: value })).to.equal(`MAX_FEE_PER_GAS_GWEI: must be a positive number of gwei (up to 9 decimals), got "${value}"`);
    }
    expect(refused({ REPLACE_AFTER_SECONDS: "0" })).to.equal('REPLACE_AFTER_SECONDS: must be an integer >= 1, got "0"');
  });
});
