import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { once } from "node:events";
import { expect } from "chai";
import { PROJECT_ROOT } from "../../src/harness/hardhat.js";

async function answers(url: string): Promise<boolean> {
  try {
    await fetch(url, { signal: AbortSignal.timeout(1_000) });
    return true;
  } catch {
    return false;
  }
}

describe("npm start under a CI job (scripts/bootstrap.mjs)", function () {
  this.timeout(60_000);

  it("prints only the JSON line with --silent, and stops the stack when npm is killed", async () => {
    const npm = spawn("npm", ["start", "--silent", "--", "--json", "--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0", "--networks", "cronos-testnet"], {
      cwd: PROJECT_ROOT,
      stdio: ["ignore", "pipe", "ignore"],
      detached: true, // its own process group, so cleanup can reach everything it started
    });
    try {
      const lines: string[] = [];
      const reader = createInterface({ input: npm.stdout });
      reader.on("line", (line) => lines.push(line));
      const [first] = (await once(reader, "line")) as [string];
      const line = JSON.parse(first) as { facilitatorUrl: string; networks: Record<string, { rpcUrl: string }> };
      expect(await answers(`${line.facilitatorUrl}/v2/x402/supported`)).to.equal(true);
      // A SIGTERM to npm alone (as `kill $!` in a shell job does) must not leave the stack behind.
      npm.kill("SIGTERM");
      let stopped = false;
      for (let i = 0; i < 40 && !stopped; i++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        stopped = !(await answers(`${line.facilitatorUrl}/v2/x402/supported`)) && !(await answers(line.networks["cronos-testnet"]!.rpcUrl));
      }
      expect(stopped).to.equal(true);
      expect(lines).to.have.length(1);
    } finally {
      try {
        process.kill(-npm.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    }
  });
});
