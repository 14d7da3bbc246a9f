import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { expect } from "chai";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";
import { portIsFree } from "../helpers/http.js";
import { processesWithEnv, spawnInRoot, type Spawned } from "../helpers/processes.js";
import { waitUntil } from "../helpers/wait.js";

// SIGINT / SIGTERM sent to the npm process alone (as a JS harness's child.kill() or `kill <pid>` does,
// unlike Ctrl+C, which reaches every process of the terminal's job) must stop everything the script
// started. A variable set on npm marks every process below it, however deep.
const MARK = "KIT_SIGNAL_TEST_RUN";
const SIGNALS = ["SIGINT", "SIGTERM"] as const;

/** Runs `npm args` with a fresh mark; returns the process and the mark's value. */
function npm(args: readonly string[], env: Record<string, string> = {}): { proc: Spawned; mark: string } {
  const mark = randomUUID();
  return { proc: spawnInRoot("npm", args, { ...env, [MARK]: mark }), mark };
}

const marked = (mark: string) => processesWithEnv(MARK, mark);
const portOf = (url: string) => Number(new URL(url).port);

/** Signals npm only, and checks that it ends as `ending` and that nothing it started still runs. */
async function signalAndExpectAllGone(proc: Spawned, mark: string, signal: NodeJS.Signals, ending: number | NodeJS.Signals): Promise<void> {
  proc.child.kill(signal);
  expect(await proc.exited, proc.stderr()).to.equal(ending);
  // The bootstrap waits for what it signalled before it exits, so npm's exit means "stopped".
  expect(marked(mark), proc.stderr()).to.deep.equal([]);
}

describe("npm scripts stop on SIGINT and SIGTERM to the npm process (scripts/bootstrap.mjs)", function () {
  this.timeout(180_000);
  let running: Spawned | undefined;
  afterEach(() => {
    running?.kill();
    running = undefined;
  });

  for (const signal of SIGNALS) {
    it(`npm start: ${signal} stops the chains and the facilitator (no process left, ports free; --silent prints only the JSON line)`, async () => {
      const { proc, mark } = npm(["start", "--silent", "--", "--json", "--port", "0", "--testnet-rpc-port", "0", "--networks", "cronos-testnet"]);
      running = proc;
      const [line] = await proc.waitFor(/^\{.*\}$/m, 150_000);
      const ready = JSON.parse(line) as { facilitatorUrl: string; networks: Record<string, { rpcUrl: string }> };
      const ports = [portOf(ready.facilitatorUrl), portOf(ready.networks["cronos-testnet"]!.rpcUrl)];
      expect((await fetch(`${ready.facilitatorUrl}/v2/x402/supported`)).status).to.equal(200);
      const commands = marked(mark).map((p) => p.command);
      expect(commands.some((c) => c.includes("scripts/bootstrap.mjs start"))).to.equal(true);
      expect(commands.some((c) => c.includes("scripts/start.ts"))).to.equal(true);

      // The stack stops cleanly on the signal: status 0, as when it runs without npm.
      await signalAndExpectAllGone(proc, mark, signal, 0);
      for (const port of ports) expect(await portIsFree(port), `port ${port}`).to.equal(true);
      expect(proc.stdout().trim().split("\n")).to.deep.equal([line]);
      expect(proc.stderr().trimEnd().split("\n").at(-1)).to.equal("[start] stopped");
    });
  }

  for (const signal of SIGNALS) {
    it(`npm run instances: ${signal} stops the facilitators, PostgreSQL (its data deleted) and the chain; "[instances] stopped" is the last line, status 0`, async () => {
      const { proc, mark } = npm(["run", "--silent", "instances", "--", "--instances", "1", "--json"]);
      running = proc;
      const [line] = await proc.waitFor(/^\{.*\}$/m, 150_000);
      const ready = JSON.parse(line) as { facilitatorUrl: string; networks: Record<string, { rpcUrl: string }> };
      expect((await fetch(`${ready.facilitatorUrl}/healthcheck`)).status).to.equal(200);
      const postgres = marked(mark).find((p) => /\/bin\/postgres -D /.test(p.command));
      expect(postgres, marked(mark).map((p) => p.command).join("\n")).to.not.equal(undefined);
      const dataDir = / -D (\S+)/.exec(postgres!.command)![1]!;
      const ports = [portOf(ready.facilitatorUrl), portOf(Object.values(ready.networks)[0]!.rpcUrl)];

      await signalAndExpectAllGone(proc, mark, signal, 0);
      for (const port of ports) expect(await portIsFree(port), `port ${port}`).to.equal(true);
      expect(existsSync(dataDir), dataDir).to.equal(false);
      const lines = proc.stderr().trimEnd().split("\n");
      expect(lines).to.include(`[instances] ${signal}: stopping`);
      expect(lines.at(-1)).to.equal("[instances] stopped");
    });
  }

  describe("npm run facilitator, against a local node", () => {
    let chain: LocalChain;
    before(async () => {
      chain = await startLocalChain({ network: "cronos-testnet", port: 0, buyers: 0 });
    });
    after(() => chain.stop());

    for (const signal of SIGNALS) {
      it(`${signal} stops the facilitator: status 0, no process left, its port free`, async () => {
        const { proc, mark } = npm(["run", "--silent", "facilitator"], {
          CRONOS_TESTNET_RPC_URL: chain.rpcUrl,
          RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer,
          PORT: "0",
          LOG_LEVEL: "info",
          // Not the standalone default (data/ledger.db in the clone): a test leaves no file behind.
          LEDGER_FILE: ":memory:",
        });
        running = proc;
        const [, url] = await proc.waitFor(/"url":"(http:\/\/127\.0\.0\.1:\d+)".*"msg":"facilitator listening"/, 150_000);
        expect((await fetch(`${url}/healthcheck`)).status).to.equal(200);
        await signalAndExpectAllGone(proc, mark, signal, 0);
        expect(await portIsFree(portOf(url!))).to.equal(true);
      });
    }
  });

  for (const signal of SIGNALS) {
    it(`npm test: ${signal} stops the run (here during the type check): npm ends by the signal, no process left`, async () => {
      const { proc, mark } = npm(["test"]);
      running = proc;
      const typeChecking = await waitUntil(async () => marked(mark).some((p) => /node_modules\/\.bin\/tsc --noEmit/.test(p.command)), 150_000, 100);
      expect(typeChecking, proc.stderr()).to.equal(true);
      await signalAndExpectAllGone(proc, mark, signal, signal);
    });
  }
});
