import { expect } from "chai";
import request from "supertest";
import { custom, parseGwei, toHex } from "viem";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { createFacilitator } from "../../src/facilitator/server.js";
import { StartupError } from "../../src/facilitator/startup-error.js";
import { configRefusal } from "../helpers/config.js";
import { HARDHAT_KEYS, makePayment, TEST_ENV } from "../helpers/facilitator.js";
import { openChain } from "../helpers/token.js";

// What the settings do is proven by the fault suite (settlement-faults.test.ts); here, how they are read.

const BASE = { RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: "http://127.0.0.1:8545" };

const refused = (env: Record<string, string>) => configRefusal({ ...BASE, ...env });

describe("transaction lifecycle settings: MAX_FEE_PER_GAS_GWEI, REPLACE_AFTER_SECONDS", () => {
  it("leaves the cap to the chain when unset, replaces after 3 s of chain time, and reads each variable (gwei with decimals)", () => {
    expect(loadConfig(BASE).lifecycle).to.deep.equal({ replaceAfterSeconds: 3 });
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

  describe("the fee cap at start-up, from the chain's fees", function () {
    this.timeout(60_000);

    /** A local testnet chain whose base fee is `gwei` from the next block on (a Cronos-like fee level). */
    async function chainAt(gwei: string) {
      const chain = await openChain("cronos-testnet");
      await chain.connection.provider.request({ method: "hardhat_setNextBlockBaseFeePerGas", params: [toHex(parseGwei(gwei))] });
      await chain.networkHelpers.mine();
      return chain;
    }
    const open = (chain: Awaited<ReturnType<typeof openChain>>, env: Record<string, string> = {}) =>
      createFacilitator(loadConfig({ ...TEST_ENV, ...env }, { embedded: ["cronos-testnet"] }), { transports: { "cronos-testnet": custom(chain.connection.provider) } });

    it("unset: twice what the chain asks (its base fee or gas price, the higher), never under 10,000 gwei", async () => {
      const chain = await chainAt("20000");
      const gasPrice = await chain.publicClient.getGasPrice();
      const base = (await chain.publicClient.getBlock()).baseFeePerGas!;
      const facilitator = await open(chain);
      try {
        const cap = facilitator.context.networks.get("cronos-testnet")!.relayer.feeStatus().capWei!;
        expect(cap).to.equal(2n * (gasPrice > base ? gasPrice : base));
        expect(cap >= parseGwei("40000")).to.equal(true);
      } finally {
        await facilitator.close();
      }
      // A chain that asks little keeps the floor.
      const cheap = await openChain("cronos-testnet");
      const local = await open(cheap);
      try {
        expect(local.context.networks.get("cronos-testnet")!.relayer.feeStatus().capWei).to.equal(parseGwei("10000"));
      } finally {
        await local.close();
      }
    });

    it("set under what the chain asks at the least (mainnet's 2024 base fee against a 10,000 gwei cap): start-up stops naming MAX_FEE_PER_GAS_GWEI", async () => {
      const chain = await chainAt("10019");
      const error = await open(chain, { MAX_FEE_PER_GAS_GWEI: "10000" }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(StartupError);
      expect((error as Error).message).to.match(
        /^cronos-testnet: MAX_FEE_PER_GAS_GWEI: 10000 gwei is under what the chain asks at the least now \(10019 gwei per gas, its latest base fee\): nothing could be sent; raise it, or unset it for a cap that follows the chain$/,
      );
    });

    it("set at or over it: that cap, and a settle goes through at the chain's price", async () => {
      const chain = await chainAt("10019");
      const facilitator = await open(chain, { MAX_FEE_PER_GAS_GWEI: "30000" });
      try {
        expect(facilitator.context.networks.get("cronos-testnet")!.relayer.feeStatus().capWei).to.equal(parseGwei("30000"));
        const payment = await makePayment(chain);
        const answer = await request(facilitator.app).post("/v2/x402/settle").send(payment.body);
        expect([answer.status, answer.body.event]).to.deep.equal([200, "payment.settled"]);
      } finally {
        await facilitator.close();
      }
    });
  });
});
