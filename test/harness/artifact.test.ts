import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { createHardhatRuntimeEnvironment, importUserConfig } from "hardhat/hre";
import { loadKitArtifact, loadTokenArtifact, PROJECT_ROOT } from "../../src/harness/hardhat.js";

describe("the token artifact on a fresh clone (src/harness/hardhat.ts)", function () {
  this.timeout(120_000);

  it("compiles BridgedUSDC and Multicall3 when no artifact exists yet and returns them", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kit-artifacts-"));
    try {
      const configPath = join(PROJECT_ROOT, "hardhat.config.ts");
      const config = await importUserConfig(configPath);
      // A runtime whose artifacts and cache start empty, as after `git clone`.
      const hre = await createHardhatRuntimeEnvironment(
        { ...config, paths: { ...config.paths, artifacts: join(dir, "artifacts"), cache: join(dir, "cache") } },
        { config: configPath },
        PROJECT_ROOT,
      );
      const artifact = await loadTokenArtifact(hre);
      expect(artifact.deployedBytecode).to.match(/^0x[0-9a-f]{1000,}$/);
      expect(artifact.abi.some((item) => item.type === "function" && item.name === "transferWithAuthorization")).to.equal(true);
      const multicall3 = await loadKitArtifact(hre, "Multicall3");
      expect(multicall3.abi.some((item) => item.type === "function" && item.name === "aggregate3")).to.equal(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
