import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { privateKeyToAccount } from "viem/accounts";
import { processStartTime } from "../../src/cli/stack-state.js";
import { faultUsage, runFault, runTime, timeUsage } from "../../src/cli/fault.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { rpcClient, tokenBalance } from "../helpers/chain.js";
import { closedPortUrl } from "../helpers/http.js";
import { ROOT, spawnInRoot } from "../helpers/processes.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";

// `cronos-x402 fault …` and `cronos-x402 time …`: the controls from a shell, for a suite in any language.

/** Runs a command in this process: its exit status and what it printed. */
async function inProcess(run: typeof runFault, argv: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const code = await run(argv, { stdout: (text) => void (stdout += text), stderr: (text) => void (stderr += text) }, env);
  return { code, stdout, stderr };
}

/** Runs a bash script in the kit's clone (errors stop it), to its end. */
async function shell(script: string, env: NodeJS.ProcessEnv): Promise<{ code: number | NodeJS.Signals; stdout: string; stderr: string }> {
  const run = spawnInRoot("bash", ["-euo", "pipefail", "-c", script], env);
  const code = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

/** Runs the CLI as a process (from the sources), to its end. */
async function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | NodeJS.Signals; stdout: string; stderr: string }> {
  const run = spawnInRoot("node", ["--import", "tsx", "src/cli/bin.ts", ...args], env);
  const code = await run.exited;
  return { code, stdout: run.stdout(), stderr: run.stderr() };
}

describe("cronos-x402 fault and time: the controls from a shell (src/cli/fault.ts)", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  const fault = (argv: readonly string[], env: NodeJS.ProcessEnv = {}) => inProcess(runFault, argv, env);
  const time = (argv: readonly string[], env: NodeJS.ProcessEnv = {}) => inProcess(runTime, argv, env);
  const paused = () => rpcClient(stack.networks["cronos-testnet"]!.rpcUrl).readContract({ address: stack.networks["cronos-testnet"]!.token, abi: tokenAbi, functionName: "paused" });

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 1 });
  });
  after(() => stack?.stop());
  afterEach(() => stack.harness.reset());

  it("fault KIND --url: prints the fault's id (or with --json the fault); list and undo ID", async () => {
    const made = await fault(["pause", "--url", stack.harnessUrl]);
    expect(made).to.deep.include({ code: 0, stderr: "" });
    const id = made.stdout.trim();
    expect(id).to.match(/^f\d+$/);
    expect(await paused()).to.equal(true);
    const listed = await fault(["list", "--url", stack.harnessUrl]);
    expect(listed.stdout).to.equal(`${id}\tactive\tpause\tUSDC.e paused\n`);
    const undone = await fault(["undo", id, "--url", stack.harnessUrl, "--json"]);
    expect(undone.code).to.equal(0);
    expect(JSON.parse(undone.stdout)).to.have.length(1).and.to.have.nested.property("[0].state", "ended");
    expect(await paused()).to.equal(false);
  });

  it("HARNESS_URL in the environment names the stack (as after `set -a; . ./.x402.env`); balance takes whole USDC.e", async () => {
    const buyer = privateKeyToAccount(stack.networks["cronos-testnet"]!.buyers[0]!.privateKey).address;
    const env = { HARNESS_URL: stack.harnessUrl };
    const made = await fault(["balance", "--address", buyer, "--amount", "2.5", "--json"], env);
    expect(made.code, made.stderr).to.equal(0);
    expect(JSON.parse(made.stdout)).to.deep.include({ kind: "balance", state: "active", spec: { kind: "balance", address: buyer, amount: "2500000", trigger: "now" } });
    expect(await tokenBalance(stack.networks["cronos-testnet"]!.rpcUrl, stack.networks["cronos-testnet"]!.token, buyer)).to.equal(2_500_000n);
    expect(await fault(["undo", "--all"], env)).to.deep.equal({ code: 0, stdout: "1 fault(s) undone\n", stderr: "" });
  });

  it("every kind maps to its spec: rpc with its mode, methods and calls, --after-verify with --payer, busy, use/cancel-authorization, time, blocks, facilitator-down", async () => {
    const url = ["--url", stack.harnessUrl, "--json"];
    const spec = async (argv: string[]) => {
      const made = await fault([...argv, ...url]);
      expect(made.code, made.stderr).to.equal(0);
      return JSON.parse(made.stdout).spec as Record<string, unknown>;
    };
    expect(await spec(["rpc", "--mode", "delay", "--delay-ms", "50", "--for-calls", "3", "--methods", "eth_call, eth_sendRawTransaction", "--network", "testnet"])).to.deep.equal({
      kind: "rpc",
      mode: "delay",
      delayMs: 50,
      forCalls: 3,
      methods: ["eth_call", "eth_sendRawTransaction"],
      network: "cronos-testnet",
      trigger: "now",
    });
    const payer = privateKeyToAccount(stack.networks["cronos-testnet"]!.buyers[0]!.privateKey).address;
    expect(await spec(["cancel-authorization", "--after-verify", "--payer", payer])).to.deep.equal({ kind: "authorization", action: "cancel", trigger: "after-verify", payer });
    expect(await spec(["use-authorization", "--after-verify"])).to.deep.equal({ kind: "authorization", action: "use", trigger: "after-verify" });
    expect(await spec(["busy", "--for-seconds", "5", "--after-verify"])).to.deep.equal({ kind: "busy", forSeconds: 5, trigger: "after-verify" });
    expect(await spec(["time", "--seconds", "5"])).to.deep.equal({ kind: "time", seconds: 5, trigger: "now" });
    expect(await spec(["blocks", "--for-seconds", "30"])).to.deep.equal({ kind: "blocks", forSeconds: 30, trigger: "now" });
    expect(await spec(["facilitator-down", "--for-seconds", "30"])).to.deep.equal({ kind: "facilitator-down", forSeconds: 30 });
  });

  it("time advance / stop-blocks / show / resume-blocks", async () => {
    const before = (await stack.harness.status()).networks["cronos-testnet"]!.chainTime;
    const advanced = await time(["advance", "60", "--url", stack.harnessUrl, "--json"]);
    expect(advanced.code, advanced.stderr).to.equal(0);
    expect(JSON.parse(advanced.stdout).chainTime["cronos-testnet"]).to.be.at.least(before + 60);
    const stopped = await time(["stop-blocks", "--url", stack.harnessUrl]);
    expect(stopped.stdout).to.match(/^f\d+\n$/);
    const shown = await time(["show", "--url", stack.harnessUrl]);
    expect(shown.stdout).to.match(/^cronos-testnet\tchain time \d{4}-\d\d-\d\dT[\d:.]+Z \(\d+\), block \d+, blocks stopped\nfacilitator\thttp:\/\/127\.0\.0\.1:\d+ running\n$/);
    expect(await time(["resume-blocks", "--url", stack.harnessUrl])).to.deep.equal({ code: 0, stdout: "1 block stop(s) undone\n", stderr: "" });
  });

  it("usage errors exit 2 with the usage; the stack's refusals and an unreachable stack exit 1 with one line", async () => {
    const usage = async (run: typeof runFault, argv: string[], message: string, text: string) => expect(await inProcess(run, argv)).to.deep.equal({ code: 2, stdout: "", stderr: `error: ${message}\n\n${text}\n` });
    await usage(runFault, [], "name a fault kind, or list, undo or restart-facilitator", faultUsage());
    await usage(runFault, ["meteor", "--url", stack.harnessUrl], 'unknown fault "meteor" (kinds: balance, pause, blacklist, use-authorization, cancel-authorization, time, rpc, busy, blocks, facilitator-down, lagging-backend, mempool-lost, min-fee, no-replacement)', faultUsage());
    await usage(runFault, ["busy", "--for-seconds", "soon"], '--for-seconds: must be a whole number, got "soon"', faultUsage());
    await usage(runFault, ["balance", "--amount", "1.1234567"], '--amount: must be whole USDC.e with at most 6 decimals (e.g. 0 or 2.5), got "1.1234567"', faultUsage());
    await usage(runFault, ["undo"], "undo takes fault ids, or --all", faultUsage());
    await usage(runFault, ["pause", "--colour"], "Unknown option '--colour'", faultUsage());
    await usage(runTime, ["advance"], "advance takes SECONDS", timeUsage());
    await usage(runTime, ["warp"], 'unknown time command "warp"', timeUsage());

    expect(await fault(["busy", "--url", stack.harnessUrl])).to.deep.equal({ code: 1, stdout: "", stderr: "error: the harness refused (HTTP 400): forSeconds must be a whole number of seconds from 1 to 3600\n" });
    const closed = `${await closedPortUrl()}/harness`;
    const unreachable = await fault(["pause", "--url", closed]);
    expect(unreachable).to.deep.equal({ code: 1, stdout: "", stderr: `error: cannot reach the harness at ${closed}: ECONNREFUSED\n` });
    const dir = mkdtempSync(join(tmpdir(), "x402-fault-cli-"));
    try {
      expect(await fault(["pause", "--state-dir", dir])).to.deep.equal({
        code: 1,
        stdout: "",
        stderr: `error: no stack state in ${dir}: start one with \`cronos-x402 start --background\`, or name it with --url URL (or HARNESS_URL)\n`,
      });
      writeFileSync(join(dir, "stack.json"), "{}");
      expect((await fault(["pause", "--state-dir", dir])).stderr).to.match(/^error: .*stack\.json is not a state file of `cronos-x402 start --background`/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(await paused()).to.equal(false);
  });
});

describe("cronos-x402 fault and time against a stack started with start --background (found through its state file)", function () {
  this.timeout(240_000);
  let dir: string;
  let pid: number | undefined;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "x402-fault-background-"));
  });
  after(async () => {
    if (pid !== undefined && processStartTime(pid) !== undefined) process.kill(pid, "SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("start --background, then fault busy (the facilitator answers 429), time advance, fault list, undo --all, restart-facilitator, stop", async () => {
    const stateDir = join(dir, "state");
    const envFile = join(dir, ".x402.env");
    const start = await cli(["start", "--background", "--state-dir", stateDir, "--write-env", envFile, "--networks", "testnet", "--port", "0", "--testnet-rpc-port", "0", "--buyers", "1"]);
    expect(start.code, start.stderr).to.equal(0);
    pid = (JSON.parse(readFileSync(join(stateDir, "stack.json"), "utf8")) as { pid: number }).pid;
    const env = Object.fromEntries(readFileSync(envFile, "utf8").trimEnd().split("\n").map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]));
    expect(env.HARNESS_URL).to.match(/^http:\/\/127\.0\.0\.1:\d+\/harness$/);
    expect(JSON.parse(readFileSync(join(stateDir, "stack.json"), "utf8")).harnessUrl).to.equal(env.HARNESS_URL);

    // docs/failures.md's curl lines, as written, with the env file's variables.
    const doc = readFileSync(join(ROOT, "docs", "failures.md"), "utf8");
    const blocks = [...doc.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
    const curl = blocks.find((block) => block.includes('curl -s -X POST "$HARNESS_URL/faults"'));
    expect(curl, "the doc's curl block").to.be.a("string");
    const curled = await shell(curl!, env);
    expect(curled.code, curled.stderr).to.equal(0);
    const answers = curled.stdout.trim().split("\n");
    expect(answers.map((line) => Object.keys(JSON.parse(line) as object)[0])).to.deep.equal(["id", "id", "chainTime", "id", "resumed", "0", "id", "undone", "facilitator"]);
    expect(JSON.parse(answers[7]!)).to.deep.equal({ undone: 1 });
    expect(curled.stdout).not.to.contain('"error"');
    // docs/failures.md's signing lines, as written: who it signs for, then a payment of theirs.
    const signing = blocks.find((block) => block.includes('"$HARNESS_URL/sign"'));
    expect(signing, "the doc's signing block").to.be.a("string");
    const signed = await shell(signing!, env);
    expect(signed.code, signed.stderr).to.equal(0);
    const [listedBuyers, payment] = signed.stdout.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(listedBuyers).to.deep.equal({ buyers: [env.BUYER_ADDRESS] });
    expect(payment).to.deep.include({ header: "X-PAYMENT", dialect: "cronos", network: "cronos-testnet", payer: env.BUYER_ADDRESS, payTo: env.PAY_TO, amount: "10000" });
    // docs/failures.md's CLI lines, as written (npx standing for the kit's CLI from its sources), HARNESS_URL naming the stack.
    const commands = blocks.find((block) => block.includes("npx cronos-x402 fault busy"));
    expect(commands, "the doc's CLI block").to.be.a("string");
    const ran = await shell(`npx() { shift; node --import tsx src/cli/bin.ts "$@"; }\n${commands!}`, env);
    expect(ran.code, ran.stderr).to.equal(0);
    expect(ran.stdout).to.match(/^f\d+\nf\d+\nf\d+\n/);
    expect(ran.stdout, ran.stdout).to.contain("3 fault(s) undone\n");

    const where = ["--state-dir", stateDir];
    const busy = await cli(["fault", "busy", "--for-seconds", "60", ...where]);
    expect(busy.code, busy.stderr).to.equal(0);
    const verify = await fetch(`${env.FACILITATOR_URL}/v2/x402/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(verify.status).to.equal(429);
    expect(Number(verify.headers.get("retry-after"))).to.be.within(50, 60);
    const listed = await cli(["fault", "list", "--json", ...where]);
    const listedFaults = JSON.parse(listed.stdout) as Array<{ id: string; state: string }>;
    expect(listedFaults.filter((each) => each.state !== "ended").map((each) => [each.id, each.state])).to.deep.equal([[busy.stdout.trim(), "active"]]);
    expect((await cli(["time", "advance", "30", ...where])).stdout).to.match(/^cronos-testnet\t\d{4}-.*Z \(\d+\)\n$/);
    expect(await cli(["fault", "undo", "--all", ...where])).to.deep.include({ code: 0, stdout: "1 fault(s) undone\n" });
    expect((await fetch(`${env.FACILITATOR_URL}/v2/x402/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).to.equal(400);
    expect(await cli(["fault", "restart-facilitator", ...where])).to.deep.include({ code: 0, stdout: `facilitator restarted at ${env.FACILITATOR_URL}\n` });
    expect((await fetch(`${env.FACILITATOR_URL}/v2/x402/supported`)).status).to.equal(200);


    expect((await cli(["stop", "--state-dir", stateDir])).code).to.equal(0);
    expect(await cli(["fault", "list", ...where])).to.deep.include({ code: 1, stdout: "" });
  });
});
