import { createRequire } from "node:module";
import { defineConfig } from "hardhat/config";
import hardhatViem from "@nomicfoundation/hardhat-viem";
import hardhatMocha from "@nomicfoundation/hardhat-mocha";
import hardhatNetworkHelpers from "@nomicfoundation/hardhat-network-helpers";
import { KIT_HARDHAT_NETWORKS } from "./src/harness/hardhat-networks.js";

const require = createRequire(import.meta.url);
// The WASM build shipped in the npm `solc` package: compiles offline, no compiler download.
const solcPackage = require("solc/package.json") as { version: string };

export default defineConfig({
  plugins: [hardhatViem, hardhatMocha, hardhatNetworkHelpers],
  solidity: {
    version: solcPackage.version,
    path: require.resolve("solc/soljson.js"),
    settings: { optimizer: { enabled: true, runs: 200 } },
  },
  // Local chains that report the real Cronos chain ids, so signatures made for them verify.
  networks: { ...KIT_HARDHAT_NETWORKS },
  paths: {
    tests: { mocha: "test" },
  },
  test: {
    mocha: { timeout: 60_000 },
  },
});
