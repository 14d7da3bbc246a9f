import { expect } from "chai";
import { cronosPrice, cronosSpendControl, networkOfCaip2, caip2OfNetwork, v2RequirementsOf } from "../../src/protocol/x402v2.js";
import { paymentRequirements } from "../../src/seller/index.js";
import { VECTOR_PAYEE } from "../helpers/vectors.js";

const TESTNET_TOKEN = "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0";
const MAINNET_TOKEN = "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C";

describe("protocol: the x402 v2 vocabulary (src/protocol/x402v2.ts)", () => {
  it("maps Cronos names and CAIP-2 ids both ways (the alias cronos is mainnet)", () => {
    expect(["cronos-testnet", "cronos-mainnet", "cronos", "base"].map(caip2OfNetwork)).to.deep.equal(["eip155:338", "eip155:25", "eip155:25", undefined]);
    expect(["eip155:338", "eip155:25", "eip155:1", "cronos-testnet"].map(networkOfCaip2)).to.deep.equal(["cronos-testnet", "cronos-mainnet", undefined, undefined]);
  });

  it("prices a route in USDC.e for @x402/express: asset, base units and the token's EIP-712 domain", () => {
    expect(cronosPrice("eip155:338", "$0.01")).to.deep.equal({ asset: TESTNET_TOKEN, amount: "10000", extra: { name: "Bridged USDC (Stargate)", version: "1" } });
    expect(cronosPrice("eip155:25", "1.5")).to.deep.equal({ asset: MAINNET_TOKEN, amount: "1500000", extra: { name: "Bridged USDC (Stargate)", version: "2" } });
    expect(cronosPrice("cronos", 42n)).to.deep.equal({ asset: MAINNET_TOKEN, amount: "42", extra: { name: "Bridged USDC (Stargate)", version: "2" } });
    expect(cronosPrice("cronos-testnet", "$0.000001").amount).to.equal("1");
  });

  it("refuses another network, a negative amount and dollars finer than USDC.e's 6 decimals", () => {
    expect(() => cronosPrice("eip155:1", "$1")).to.throw(RangeError, /^not a Cronos network: "eip155:1"/);
    expect(() => cronosPrice("eip155:338", -1n)).to.throw(RangeError, /must not be negative/);
    expect(() => cronosPrice("eip155:338", "$0.0000001")).to.throw(RangeError, /at most 6 decimals/);
    expect(() => cronosPrice("eip155:338", "ten")).to.throw(RangeError, /at most 6 decimals/);
  });

  it("gives an @x402/* buyer the spend control that allows USDC.e on one network, capped", () => {
    expect(cronosSpendControl("eip155:338", "$0.01")).to.deep.equal({ network: "eip155:338", asset: TESTNET_TOKEN, maxAmountPerPayment: "10000" });
    expect(cronosSpendControl("cronos-mainnet", 1_000_000n)).to.deep.equal({ network: "eip155:25", asset: MAINNET_TOKEN, maxAmountPerPayment: "1000000" });
  });

  it("writes Cronos requirements in x402 v2 form, keeping a seller's own domain and extra fields", () => {
    const cronos = paymentRequirements({ network: "cronos", payTo: VECTOR_PAYEE, amount: 2_500_000n, maxTimeoutSeconds: 60, extra: { note: "x" } });
    expect(v2RequirementsOf(cronos)).to.deep.equal({
      scheme: "exact",
      network: "eip155:25",
      asset: MAINNET_TOKEN,
      amount: "2500000",
      payTo: VECTOR_PAYEE,
      maxTimeoutSeconds: 60,
      extra: { note: "x", name: "Bridged USDC (Stargate)", version: "2" },
    });
    const forked = paymentRequirements({ network: "cronos-testnet", payTo: VECTOR_PAYEE, amount: 1n, extra: { name: "Fork USDC", version: "9" } });
    expect(v2RequirementsOf(forked)?.extra).to.deep.equal({ name: "Fork USDC", version: "9" });
    const elsewhere = paymentRequirements({ network: "base", payTo: VECTOR_PAYEE, amount: 1n, asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e" });
    expect(v2RequirementsOf(elsewhere)).to.equal(undefined);
  });
});
