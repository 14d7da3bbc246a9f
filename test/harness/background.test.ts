import { execFileSync, spawn } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { expect } from "chai";
import express from "express";
import { createPublicClient, erc20Abi, http, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { wrapFetchWithPayment } from "../../src/buyer/index.js";
import { ENV_FILE_NAMES, envFileLines } from "../../src/cli/env-file.js";
import { processStartTime } from "../../src/cli/stack-state.js";
import { parseStartArgs, UsageError } from "../../src/harness/cli.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { listen } from "../helpers/http.js";
import { spawnInRoot } from "../helpers/processes.js";
import { thrown } from "../helpers/reject.js";

// `cronos-x402 start --background` and `cronos-x402 stop`, as a CI job in any language runs them: each
// a process that returns, the stack detached in between. Every run has a state folder and an env file of
// its own (the default, .cronos-x402 in the current folder, would be the kit's clone here).

/** Runs the CLI (from the sources, as `npm start` does) to its end: exit status and both streams. */
async function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | NodeJS.Signals; stdout: string; stderr: string }> {
  const run = spawnInRoot("node", ["--import", "tsx", "src/cli/bin.ts", ...args], env);
  const code = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/** The NAME=value lines of an env file. */
function readEnvFile(path: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(path, "utf8")
      .trimEnd()
      .split("\n")
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

/** Whether `pid` runs (a zombie does not). */
const runs = (pid: number) => processStartTime(pid) !== undefined;

const FREE_PORTS = ["--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"];

describe("cronos-x402 start --background and stop (src/cli/background.ts, stop.ts)", function () {
  this.timeout(180_000);
  let dir: string;
  let started: number[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "x402-background-"));
    started = [];
  });
  afterEach(() => {
    // Whatever a failed test left running.
    for (const pid of started) if (runs(pid)) process.kill(pid, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });
  /** The pid a state folder names, remembered for the clean-up. */
  const statePid = (stateDir: string) => {
    const pid = (JSON.parse(readFileSync(join(stateDir, "stack.json"), "utf8")) as { pid: number }).pid;
    started.push(pid);
    return pid;
  };

  it("returns once ready; the env file's facilitator, buyer key, payTo, RPC and token pay a real route; stop returns once everything has gone", async () => {
    const stateDir = join(dir, "state");
    const envFile = join(dir, "stack.env");
    const start = await cli(["start", "--background", "--write-env", envFile, "--state-dir", stateDir, "--networks", "testnet", ...FREE_PORTS.slice(0, 4)]);
    expect(start.code, start.stderr).to.equal(0);
    const pid = statePid(stateDir);
    expect(runs(pid)).to.equal(true);
    // The human summary on stdout (the detached stack's own), and where things are on stderr.
    expect(start.stdout).to.match(/^Facilitator {2}http:\/\/127\.0\.0\.1:\d+ /m);
    expect(start.stdout).to.include("`cronos-x402 stop` stops everything.");
    expect(start.stderr).to.include(`[start] running in the background (pid ${pid}); its log: ${join(stateDir, "stack.log")}; its URLs and a buyer key: ${envFile}; \`cronos-x402 stop\` --state-dir ${stateDir} stops it\n`);
    expect((statSync(envFile).mode & 0o777).toString(8)).to.equal("600");

    const env = readEnvFile(envFile);
    // Every name but the mainnet's (it does not run); the exact lines are the last test's.
    expect(Object.keys(env)).to.deep.equal(ENV_FILE_NAMES.filter((name) => !name.startsWith("MAINNET_")));
    expect(env).to.deep.include({ NETWORK: "cronos-testnet", CHAIN_ID: "338", TOKEN_ADDRESS: "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0", TESTNET_RPC_URL: env.RPC_URL });
    expect(env).to.deep.include({ TOKEN_NAME: "'Bridged USDC (Stargate)'", TOKEN_VERSION: "1", TESTNET_TOKEN_NAME: "'Bridged USDC (Stargate)'", TESTNET_TOKEN_VERSION: "1" });
    expect(env.BUYER_PRIVATE_KEYS!.split(",")).to.have.length(3).and.to.include(env.BUYER_PRIVATE_KEY);
    expect(privateKeyToAccount(env.BUYER_PRIVATE_KEY as Hex).address).to.equal(env.BUYER_ADDRESS);

    // A seller of the test's own, paid by the env file's buyer through the env file's facilitator.
    const app = express();
    app.get("/paid", requirePayment(paymentRequirements({ network: "cronos-testnet", payTo: env.PAY_TO as Address, amount: 10_000n, description: "t" }), { facilitatorUrl: env.FACILITATOR_URL! }), (_req, res) => {
      res.json({ ok: true });
    });
    const seller = await listen(app);
    const chain = createPublicClient({ transport: http(env.RPC_URL) });
    const balance = () => chain.readContract({ address: env.TOKEN_ADDRESS as Address, abi: erc20Abi, functionName: "balanceOf", args: [env.PAY_TO as Address] });
    try {
      const before = await balance();
      const pay = wrapFetchWithPayment(fetch, { signer: privateKeyToAccount(env.BUYER_PRIVATE_KEY as Hex), maxAmount: 10_000n });
      expect((await pay(`${seller.url}/paid`)).status).to.equal(200);
      expect((await balance()) - before).to.equal(10_000n);
    } finally {
      await seller.close();
    }

    // A second start on the same state folder is refused while the first runs, naming it.
    const again = await cli(["start", "--background", "--state-dir", stateDir, ...FREE_PORTS]);
    expect({ code: again.code, stdout: again.stdout }).to.deep.equal({ code: 1, stdout: "" });
    expect(again.stderr).to.equal(
      `error: a stack started by \`cronos-x402 start --background\` already runs (pid ${pid}, ${env.FACILITATOR_URL}); stop it first with \`cronos-x402 stop\` --state-dir ${stateDir}, or give this one another --state-dir\n`,
    );

    const stop = await cli(["stop", "--state-dir", stateDir]);
    expect(stop).to.deep.equal({
      code: 0,
      stdout: "",
      stderr: `[stop] stopping the local stack (pid ${pid}, ${env.FACILITATOR_URL})\n[stop] stopped (its log: ${join(stateDir, "stack.log")})\n`,
    });
    // Gone when stop returns: the process, its ports, the state file; its log ends with its own stopped line.
    expect(runs(pid)).to.equal(false);
    expect(await fetch(`${env.FACILITATOR_URL}/healthcheck`).then(() => "answered", () => "refused")).to.equal("refused");
    expect(await fetch(env.RPC_URL!, { method: "POST" }).then(() => "answered", () => "refused")).to.equal("refused");
    expect(existsSync(join(stateDir, "stack.json"))).to.equal(false);
    expect(readFileSync(join(stateDir, "stack.log"), "utf8").trimEnd().split("\n").slice(-2)).to.deep.include("[start] stopped");

    // Nothing to stop is no error: a CI step `if: always()` after a failed start passes.
    expect(await cli(["stop", "--state-dir", stateDir])).to.deep.equal({
      code: 0,
      stdout: "",
      stderr: `[stop] nothing to stop: no stack state in ${stateDir} (\`cronos-x402 start --background\` writes it)\n`,
    });
  });

  it("--json prints the ready line as the foreground stack does; a job whose environment holds an env file's names starts it all the same", async () => {
    const stateDir = join(dir, "state");
    // As after `cat .x402.env >> "$GITHUB_ENV"` (or `set -a; . ./.x402.env`): RPC_URL and the rest are in the environment.
    const inherited = Object.fromEntries(ENV_FILE_NAMES.map((name) => [name, name.endsWith("URL") ? "http://127.0.0.1:1" : "1"]));
    // A link planted where the env file goes (in a shared folder, say) is replaced, never written through.
    const victim = join(dir, "victim");
    writeFileSync(victim, "keep\n");
    const envLink = join(dir, "stack.env");
    symlinkSync(victim, envLink);
    const start = await cli(["start", "--background", "--json", "--write-env", envLink, "--state-dir", stateDir, "--networks", "mainnet", "--port", "0", "--mainnet-rpc-port", "0", "--buyers", "1"], inherited);
    expect(start.code, start.stderr).to.equal(0);
    statePid(stateDir);
    expect(readFileSync(victim, "utf8")).to.equal("keep\n");
    expect(lstatSync(envLink).isSymbolicLink()).to.equal(false);
    expect(readFileSync(envLink, "utf8")).to.match(/^FACILITATOR_URL=http:\/\/127\.0\.0\.1:\d+\nHARNESS_URL=http:\/\/127\.0\.0\.1:\d+\/harness\nNETWORK=cronos-mainnet\n/);
    const lines = start.stdout.trimEnd().split("\n");
    expect(lines).to.have.length(1);
    const line = JSON.parse(lines[0]!) as { facilitatorUrl: string; harnessUrl: string; relayer: string; networks: Record<string, { chainId: number; buyers: unknown[] }> };
    expect(Object.keys(line)).to.deep.equal(["facilitatorUrl", "harnessUrl", "relayer", "networks"]);
    expect(line.harnessUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+\/harness$/);
    expect(Object.keys(line.networks)).to.deep.equal(["cronos-mainnet"]);
    expect(line.networks["cronos-mainnet"]!.chainId).to.equal(25);
    expect(line.networks["cronos-mainnet"]!.buyers).to.have.length(1);
    expect((await cli(["stop", "--state-dir", stateDir])).code).to.equal(0);
  });

  it("a link planted at the log's name is not written through: exit 1 naming it, nothing started", async () => {
    const stateDir = join(dir, "state");
    mkdirSync(stateDir);
    const victim = join(dir, "victim");
    writeFileSync(victim, "keep\n");
    symlinkSync(victim, join(stateDir, "stack.log"));
    const start = await cli(["start", "--background", "--state-dir", stateDir, ...FREE_PORTS]);
    expect(start).to.deep.equal({
      code: 1,
      stdout: "",
      stderr: `error: cannot write the stack's log ${join(stateDir, "stack.log")} (ELOOP: a link there is not followed); remove it, or choose another folder with --state-dir DIR\n`,
    });
    expect(readFileSync(victim, "utf8")).to.equal("keep\n");
    expect(existsSync(join(stateDir, "stack.json"))).to.equal(false);
  });

  it("a port in use: exit 1 with the stack's own one-line reason; no state file, nothing left running", async () => {
    const taken = await new Promise<Server>((resolve) => {
      const server = createServer().listen(0, "127.0.0.1", () => resolve(server));
    });
    const port = (taken.address() as { port: number }).port;
    try {
      const stateDir = join(dir, "state");
      const start = await cli(["start", "--background", "--state-dir", stateDir, "--port", String(port), "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"]);
      expect({ code: start.code, stdout: start.stdout }).to.deep.equal({ code: 1, stdout: "" });
      expect(start.stderr).to.equal(
        `error: port ${port} (facilitator) is already in use on 127.0.0.1; choose another with --port N or PORT=N (0 = any free port), or stop what uses it\n(the local stack's log: ${join(stateDir, "stack.log")})\n`,
      );
      expect(existsSync(join(stateDir, "stack.json"))).to.equal(false);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it("a frozen dependency (a fork RPC that accepts and never answers): gives up after --ready-timeout, stops what it started, exit 1", async () => {
    // Accepts connections and reads nothing: every request hangs.
    const sockets: Socket[] = [];
    const frozen = await new Promise<Server>((resolve) => {
      const server = createServer((socket) => void sockets.push(socket)).listen(0, "127.0.0.1", () => resolve(server));
    });
    const forkUrl = `http://127.0.0.1:${(frozen.address() as { port: number }).port}/v2/SECRET-KEY`;
    try {
      const stateDir = join(dir, "state");
      const start = await cli(["start", "--background", "--ready-timeout", "3", "--state-dir", stateDir, "--networks", "testnet", "--fork-testnet", forkUrl, "--port", "0", "--testnet-rpc-port", "0"]);
      expect({ code: start.code, stdout: start.stdout }).to.deep.equal({ code: 1, stdout: "" });
      const lines = start.stderr.trimEnd().split("\n");
      const pid = Number(/^error: the local stack did not start: it was not ready within 3 s; it was stopped \(pid (\d+)\)$/.exec(lines[0]!)?.[1]);
      expect(pid, start.stderr).to.be.above(0);
      // Nothing left: the stack's process, its state file; the URL's key never shown.
      expect(runs(pid)).to.equal(false);
      expect(existsSync(join(stateDir, "stack.json"))).to.equal(false);
      expect(start.stderr + readFileSync(join(stateDir, "stack.log"), "utf8")).to.not.include("SECRET-KEY");
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => frozen.close(resolve));
    }
  });

  it("stop signals nothing it cannot prove is the stack: a reused pid, a forged or oversized state file", async () => {
    const stateDir = join(dir, "state");
    mkdirSync(stateDir);
    const statePath = join(stateDir, "stack.json");
    // A live process that is not the stack: the state's start time is not its own (its pid was reused).
    const bystander = spawn("sleep", ["60"], { stdio: "ignore" });
    started.push(bystander.pid!);
    try {
      writeFileSync(statePath, JSON.stringify({ kind: "cronos-x402 local stack", pid: bystander.pid, processStart: "1", startedAt: "2026-01-01T00:00:00.000Z", log: join(stateDir, "stack.log") }));
      const reused = await cli(["stop", "--state-dir", stateDir]);
      expect(reused).to.deep.equal({
        code: 0,
        stdout: "",
        stderr: `[stop] nothing to stop: the stack (pid ${bystander.pid}, started 2026-01-01T00:00:00.000Z) is no longer running; its log: ${join(stateDir, "stack.log")}\n`,
      });
      expect(runs(bystander.pid!)).to.equal(true);
      expect(existsSync(statePath)).to.equal(false);

      // Not a state file of ours: refused, nothing signalled, the file left for the user to look at.
      writeFileSync(statePath, JSON.stringify({ pid: bystander.pid }));
      const forged = await cli(["stop", "--state-dir", stateDir]);
      expect({ code: forged.code, stdout: forged.stdout }).to.deep.equal({ code: 1, stdout: "" });
      expect(forged.stderr).to.match(new RegExp(`^error: ${statePath.replace(/[.]/g, "\\.")} is not a state file of \`cronos-x402 start --background\` \\(kind: .+\\); nothing was signalled\\n$`));
      expect(runs(bystander.pid!)).to.equal(true);

      // Flooded: never read past 64 KiB.
      writeFileSync(statePath, "x".repeat(10 * 1024 * 1024));
      const flooded = await cli(["stop", "--state-dir", stateDir]);
      expect(flooded).to.deep.equal({ code: 1, stdout: "", stderr: `error: ${statePath} is ${10 * 1024 * 1024} bytes, not a state file of \`cronos-x402 start --background\`; nothing was signalled\n` });
      // start --background refuses it too, rather than overwrite what it cannot read.
      const start = await cli(["start", "--background", "--state-dir", stateDir, ...FREE_PORTS]);
      expect(start).to.deep.equal({
        code: 1,
        stdout: "",
        stderr: `error: ${statePath} is ${10 * 1024 * 1024} bytes, not a state file of \`cronos-x402 start --background\`; delete it, or choose another folder with --state-dir DIR\n`,
      });
      expect(runs(bystander.pid!)).to.equal(true);
    } finally {
      bystander.kill("SIGKILL");
    }
  });

  it("a stack that does not stop (frozen: SIGSTOP) is killed after --timeout: exit 1, gone", async () => {
    const stateDir = join(dir, "state");
    const start = await cli(["start", "--background", "--state-dir", stateDir, "--networks", "testnet", "--port", "0", "--testnet-rpc-port", "0", "--buyers", "0"]);
    expect(start.code, start.stderr).to.equal(0);
    const pid = statePid(stateDir);
    process.kill(pid, "SIGSTOP");
    const stop = await cli(["stop", "--state-dir", stateDir, "--timeout", "2"]);
    expect(stop).to.deep.equal({
      code: 1,
      stdout: "",
      stderr: `[stop] stopping the local stack (pid ${pid}, ${/^Facilitator {2}(\S+)/m.exec(start.stdout)![1]})\nerror: the stack (pid ${pid}) did not stop within 2 s: killed; its log: ${join(stateDir, "stack.log")}\n`,
    });
    expect(runs(pid)).to.equal(false);
    expect(existsSync(join(stateDir, "stack.json"))).to.equal(false);
  });

  it("refuses bad options with one line: --state-dir or --ready-timeout without --background, a timeout out of range, an unknown stop flag", async () => {
    const usage = (argv: string[]) => thrown(() => parseStartArgs(argv, {}), UsageError, argv.join(" ")).message;
    expect(usage(["--state-dir", "x"])).to.equal("--state-dir goes with --background (see --help)");
    expect(usage(["--ready-timeout", "5"])).to.equal("--ready-timeout goes with --background (see --help)");
    expect(usage(["--background", "--ready-timeout", "0"])).to.equal('--ready-timeout: must be a whole number of seconds from 1 to 3600, got "0"');
    expect(usage(["--background", "--ready-timeout", "9999"])).to.equal('--ready-timeout: must be a whole number of seconds from 1 to 3600, got "9999"');
    expect(usage(["--write-env", ""])).to.equal('--write-env: needs a path, got ""');
    expect(parseStartArgs(["--background", "--write-env", "a.env"], {})).to.deep.include({ envFile: "a.env", background: { stateDir: ".cronos-x402", readyTimeoutMs: 180_000 } });
    const stop = await cli(["stop", "--bogus"]);
    expect({ code: stop.code, stdout: stop.stdout }).to.deep.equal({ code: 2, stdout: "" });
    expect(stop.stderr).to.match(/^error: Unknown option '--bogus'[^\n]*\n\nUsage: cronos-x402 stop /);
  });

  it("writes an env file a shell, docker and GitHub Actions read as is: NAME=value lines, the first network cronos-testnet", () => {
    const buyers = [
      { address: "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC", privateKey: "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a" },
      { address: "0x90F79bf6EB2c4f870365E785982E1f101E93b906", privateKey: "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6" },
    ] as const;
    const network = (chainId: number, port: number, token: Address) => ({
      chainId,
      viemChain: chainId === 338 ? ("cronosTestnet" as const) : ("cronos" as const),
      rpcUrl: `http://127.0.0.1:${port}`,
      wsUrl: `ws://127.0.0.1:${port}`,
      token,
      domain: { name: "Bridged USDC (Stargate)", version: chainId === 338 ? "1" : "2" },
      buyers: [...buyers],
    });
    const lines = envFileLines({
      facilitatorUrl: "http://127.0.0.1:8402",
      harnessUrl: "http://127.0.0.1:41000/harness",
      seller: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
      networks: { "cronos-mainnet": network(25, 8546, "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C"), "cronos-testnet": network(338, 8545, "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0") },
    });
    expect(lines).to.deep.equal([
      "FACILITATOR_URL=http://127.0.0.1:8402",
      "HARNESS_URL=http://127.0.0.1:41000/harness",
      "NETWORK=cronos-testnet",
      "CHAIN_ID=338",
      "RPC_URL=http://127.0.0.1:8545",
      "WS_URL=ws://127.0.0.1:8545",
      "TOKEN_ADDRESS=0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
      "TOKEN_NAME='Bridged USDC (Stargate)'",
      "TOKEN_VERSION=1",
      "BUYER_ADDRESS=0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC",
      "BUYER_PRIVATE_KEY=0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
      "BUYER_PRIVATE_KEYS=0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a,0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
      "PAY_TO=0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
      "MAINNET_RPC_URL=http://127.0.0.1:8546",
      "MAINNET_TOKEN_ADDRESS=0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C",
      "MAINNET_TOKEN_NAME='Bridged USDC (Stargate)'",
      "MAINNET_TOKEN_VERSION=2",
      "TESTNET_RPC_URL=http://127.0.0.1:8545",
      "TESTNET_TOKEN_ADDRESS=0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0",
      "TESTNET_TOKEN_NAME='Bridged USDC (Stargate)'",
      "TESTNET_TOKEN_VERSION=1",
    ]);
    // No comments; every value bare but the token's name, single-quoted (it has spaces): what a shell reads as the value itself.
    for (const line of lines) expect(line).to.match(/^[A-Z_]+=([A-Za-z0-9:/.,_-]+|'[^'\n]+')$/);
    const file = join(mkdtempSync(join(tmpdir(), "x402-env-")), ".x402.env");
    writeFileSync(file, `${lines.join("\n")}\n`);
    const sourced = execFileSync("bash", ["-c", 'set -a; . "$1"; printf "%s|" "$TOKEN_NAME" "$TOKEN_VERSION" "$MAINNET_TOKEN_NAME" "$MAINNET_TOKEN_VERSION" "$TOKEN_ADDRESS"', "bash", file], { encoding: "utf8" });
    rmSync(dirname(file), { recursive: true, force: true });
    expect(sourced).to.equal("Bridged USDC (Stargate)|1|Bridged USDC (Stargate)|2|0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0|");
    expect(lines.map((line) => line.split("=")[0])).to.have.members([...ENV_FILE_NAMES]);
  });
});
