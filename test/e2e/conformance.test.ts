import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { expect } from "chai";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createChainReader } from "../../src/conformance/chain.js";
import { catalog } from "../../src/conformance/checks/index.js";
import { runConformance } from "../../src/conformance/run.js";
import type { Dialect } from "../../src/conformance/check.js";
import type { CheckResult } from "../../src/conformance/runner.js";
import type { Target } from "../../src/conformance/target.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { NETWORK_NAMES, NETWORKS } from "../../src/protocol/networks.js";
import { findAll, parseXml } from "../helpers/xml.js";
import { tokenBalance } from "../helpers/chain.js";
import { type FacilitatorProxy, type ProxiedAnswer, type ProxiedCall, startFacilitatorProxy } from "../helpers/facilitator-proxy.js";
import { spawnInRoot } from "../helpers/processes.js";
import { STACK_OPTIONS, startTestStack, useSellerEnvironment } from "../helpers/seller.js";

/** The check lines of a run's output. */
function checkLines(output: string): string[] {
  return output.split("\n").filter((line) => /^(PASS|FAIL|SKIP) {2}/.test(line));
}

/** Runs `npm run conformance`'s script as a child process (what the bootstrap runs), with `--import` modules first. */
async function conformance(args: string[], imports: string[] = []) {
  const child = spawnInRoot("node", [...imports.flatMap((file) => ["--import", file]), "--import", "tsx", "scripts/conformance.ts", ...args]);
  try {
    const status = await child.exited;
    return { status, stdout: child.stdout(), stderr: child.stderr() };
  } finally {
    child.kill();
  }
}

interface JsonDocument {
  local: boolean;
  networks: string[];
  summary: { total: number; passed: number; failed: number; skipped: number };
  checks: CheckResult[];
}

/** The networks as a catalog sees them, to count its checks. */
const TARGETS: Target[] = NETWORK_NAMES.map((network) => ({ network, chainId: NETWORKS[network].chainId, token: NETWORKS[network].token, domain: NETWORKS[network].domain, payTo: NETWORKS[network].token }));

const name = (result: { id: string; network?: string }) => (result.network ? `${result.id}@${result.network}` : result.id);

describe("e2e: npm run conformance against the kit's own facilitator", function () {
  this.timeout(240_000);
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "conformance-e2e-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("passes every check on the local stack it starts itself (both networks, payments, rate limits): exit 0, and the console, the JUnit file and the JSON document count the same checks", async () => {
    const junit = join(dir, "local.xml");
    const { status, stdout, stderr } = await conformance(["--junit", junit, "--json"]);
    expect(status, stderr).to.equal(0);

    const document = JSON.parse(stdout) as JsonDocument;
    expect(stdout.trim().split("\n"), "stdout holds the JSON document alone").to.have.length(1);
    expect(document.local).to.equal(true);
    expect(document.networks).to.deep.equal(["cronos-testnet", "cronos-mainnet"]);
    expect(document.summary.failed, stderr).to.equal(0);
    expect(document.summary.skipped, stderr).to.equal(0);
    expect(document.summary.total).to.equal(catalog(TARGETS, ["cronos", "x402-v2"]).length);

    const lines = checkLines(stderr);
    expect(lines).to.have.length(document.summary.total);
    expect(lines.every((line) => line.startsWith("PASS  "))).to.equal(true);
    expect(stderr).to.match(new RegExp(`\\n${document.summary.total} checks: ${document.summary.total} passed, 0 failed, 0 skipped in [\\d.]+ s; http://127\\.0\\.0\\.1:\\d+ conforms`));
    // Both networks paid, and the rate limits were reached.
    for (const network of ["cronos-testnet", "cronos-mainnet"]) {
      for (const id of ["settle.pays", "settle.on-chain", "settle.replay", "settle.concurrent-once", "verify.nonce-used", "verify.expires-within-margin"]) {
        expect(document.checks.map(name)).to.include(`${id}@${network}`);
      }
    }
    expect(document.checks.map(name)).to.include.members(["verify.rate-limited", "settle.rate-limited", "verify.network-alias@cronos-mainnet"]);

    const root = parseXml(await readFile(junit, "utf8"));
    expect(root.attributes).to.include({ tests: String(document.summary.total), failures: "0", skipped: "0", errors: "0" });
    const cases = findAll(root, "testcase");
    // Grouped by suite (the service, then each network), one testcase per check.
    expect(cases.map((testcase) => testcase.attributes.name)).to.have.members(document.checks.map(name));
    expect(cases).to.have.length(document.checks.length);
    expect(lines.map((line) => line.split(/\s+/)[1])).to.deep.equal(document.checks.map(name));
  });

  describe("pointed at a URL (the local stack's facilitator, as a remote one would be)", () => {
    const env = useSellerEnvironment();
    let stack: LocalStack;
    before(() => ({ stack } = env));

    it("with a buyer key, an RPC and --settle: every check but the rate limits passes, and the key appears nowhere in its output", async () => {
      const testnet = stack.networks["cronos-testnet"]!;
      const key = testnet.buyers[1]!.privateKey;
      const junit = join(dir, "remote.xml");
      const { status, stdout, stderr } = await conformance([
        "--facilitator", stack.facilitatorUrl, "--network", "cronos-testnet", "--rpc", testnet.rpcUrl,
        "--buyer-key", key, "--pay-to", stack.seller, "--settle", "--junit", junit, "--json",
      ]);
      expect(status, stderr).to.equal(0);
      const document = JSON.parse(stdout) as JsonDocument;
      expect(document.local).to.equal(false);
      expect(document.checks.filter((check) => check.status !== "passed").map((check) => [name(check), check.message])).to.deep.equal([
        ["verify.rate-limited", "needs --rate-limit (spends this IP's verify and settle quota for up to a minute)"],
        ["settle.rate-limited", "needs --rate-limit (spends this IP's verify and settle quota for up to a minute)"],
      ]);
      expect(stderr).to.include(`buyer ${privateKeyToAccount(key).address}`);
      const written = await readFile(junit, "utf8");
      for (const form of [key, key.slice(2), key.slice(2).toUpperCase(), key.slice(2, 34)]) {
        for (const [where, text] of [["stdout", stdout], ["stderr", stderr], ["JUnit", written]] as const) {
          expect(text.toLowerCase().includes(form.toLowerCase()), `${where} holds the key`).to.equal(false);
        }
      }
    });

    it("finds a used nonce in the chain's logs without --settle, skips saying why for a buyer that has none, and passes a buyer paying itself on chain", async () => {
      const testnet = stack.networks["cronos-testnet"]!;
      const target = (key: Hex): Target => {
        const buyer = privateKeyToAccount(key);
        return { network: "cronos-testnet", chainId: 338, token: testnet.token, domain: testnet.domain, chain: createChainReader(testnet.rpcUrl), buyer, payTo: buyer.address };
      };
      const run = async (t: Target, only: string[], settle: boolean) => {
        const { report } = await runConformance({ facilitatorUrl: stack.facilitatorUrl, targets: [t], dialects: ["cronos"], settle, rateLimit: false, only });
        return report.results.map((result) => [name(result), result.status, result.status === "passed" ? "" : result.message]);
      };

      // Buyer #2 pays itself (the default payTo against a URL): its balance nets to zero, the events show the transfer.
      const self = target(testnet.buyers[2]!.privateKey);
      const before = await tokenBalance(testnet.rpcUrl, testnet.token, self.buyer!.address);
      expect(await run(self, ["settle.pays", "settle.on-chain"], true)).to.deep.equal([
        ["settle.pays@cronos-testnet", "passed", ""],
        ["settle.on-chain@cronos-testnet", "passed", ""],
      ]);
      expect(await tokenBalance(testnet.rpcUrl, testnet.token, self.buyer!.address)).to.equal(before);

      // A later run without --settle finds that payment's nonce in the logs.
      expect(await run(self, ["verify.nonce-used", "settle.nonce-used"], false)).to.deep.equal([
        ["verify.nonce-used@cronos-testnet", "passed", ""],
        ["settle.nonce-used@cronos-testnet", "passed", ""],
      ]);
      // A buyer that never paid has none to find.
      expect(await run(target(generatePrivateKey()), ["verify.nonce-used"], false)).to.deep.equal([
        ["verify.nonce-used@cronos-testnet", "skipped", "the buyer used no nonce in the last 10000 blocks; run once with --settle"],
      ]);
    });

    it("with no key, no RPC and without loading Hardhat: every check that costs nothing passes, the rest are skipped saying what they need", async () => {
      // A module hook that fails any import of Hardhat (the local stack's engine) in the child.
      const hook = join(dir, "no-hardhat.mjs");
      await writeFile(
        hook,
        `import { registerHooks } from "node:module";
registerHooks({
  resolve(specifier, context, next) {
    if (specifier === "hardhat" || specifier.startsWith("hardhat/")) throw new Error("Hardhat was loaded: " + specifier);
    return next(specifier, context);
  },
});
`,
      );
      const hooks = [pathToFileURL(hook).href];
      const { status, stdout, stderr } = await conformance(["--facilitator", stack.facilitatorUrl], hooks);
      expect(status, stderr).to.equal(0);
      const lines = checkLines(stdout);
      expect(lines.filter((line) => line.startsWith("FAIL"))).to.deep.equal([]);
      const skipped = lines.filter((line) => line.startsWith("SKIP")).map((line) => line.split(/\s+/)[1] + " — " + line.slice(line.lastIndexOf("]: ") + 3));
      for (const network of ["cronos-testnet", "cronos-mainnet"]) {
        expect(skipped).to.include.members([
          `verify.accepts@${network} — needs a funded buyer key (--buyer-key-file PATH or --buyer-key 0x…)`,
          `verify.expires-within-margin@${network} — needs the network's JSON-RPC (--rpc URL)`,
          `settle.pays@${network} — needs a funded buyer key (--buyer-key-file PATH or --buyer-key 0x…)`,
          `verify.nonce-used@${network} — needs a funded buyer key (--buyer-key-file PATH or --buyer-key 0x…)`,
        ]);
      }
      expect(lines.filter((line) => line.startsWith("PASS")).length).to.be.above(50);
      expect(stdout).to.include("cronos-testnet: chain 338, USDC.e 0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0, no RPC, no buyer key");

      // The hook is effective: a local run, which needs Hardhat, cannot even resolve it under the hook.
      const local = await conformance(["--only", "health.shape", "--network", "cronos-testnet"], hooks);
      expect(local.status).to.not.equal(0);
      expect(local.stderr).to.include('the harness needs the package "hardhat"');
    });
  });
});

describe("e2e: conformance against a facilitator that requires seller API keys (API_KEYS)", function () {
  this.timeout(60_000);
  const apiKey = `seller-${generatePrivateKey().slice(2, 26)}`;
  let stack: LocalStack;
  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], env: { API_KEYS: apiKey } });
  });
  after(() => stack?.stop());

  it("passes with --api-key-file's key, and without it every verify and settle check fails on the 401", async () => {
    const testnet = stack.networks["cronos-testnet"]!;
    const target: Target = { network: "cronos-testnet", chainId: 338, token: testnet.token, domain: testnet.domain, payTo: stack.seller };
    const run = async (key?: string) => {
      const { report } = await runConformance({
        facilitatorUrl: stack.facilitatorUrl,
        targets: [target],
        settle: false,
        rateLimit: false,
        only: ["health.shape", "verify.expired", "settle.expired@eip155:338"],
        ...(key ? { apiKey: key } : {}),
      });
      return report.results.map((result) => [name(result), result.status, result.message]);
    };
    expect(await run(apiKey)).to.deep.equal([
      ["health.shape", "passed", undefined],
      ["verify.expired@cronos-testnet", "passed", undefined],
      ["verify.expired@eip155:338", "passed", undefined],
      ["settle.expired@eip155:338", "passed", undefined],
    ]);
    const without = await run();
    expect(without.map(([id, status]) => [id, status])).to.deep.equal([
      ["health.shape", "passed"],
      ["verify.expired@cronos-testnet", "failed"],
      ["verify.expired@eip155:338", "failed"],
      ["settle.expired@eip155:338", "failed"],
    ]);
    expect(without[1]![2]).to.match(/^expected verify's refusal .*: HTTP 200, got HTTP 401 application\/json/);
  });
});

describe("e2e: conformance against deliberately wrong facilitators (a proxy that changes the kit's answers)", function () {
  this.timeout(120_000);
  const env = useSellerEnvironment();
  let proxy: FacilitatorProxy;
  let target: Target;

  before(async () => {
    const testnet = env.stack.networks["cronos-testnet"]!;
    proxy = await startFacilitatorProxy(env.stack.facilitatorUrl);
    target = {
      network: "cronos-testnet",
      chainId: testnet.chainId,
      token: testnet.token,
      domain: testnet.domain,
      chain: createChainReader(testnet.rpcUrl),
      buyer: privateKeyToAccount(testnet.buyers[2]!.privateKey),
      payTo: env.stack.seller,
      relayers: [env.stack.relayer],
    };
  });
  after(() => proxy?.close());
  beforeEach(() => proxy.reset());

  /** Runs the selected checks in this process against the proxy. */
  async function check(only: string[], settle = false, dialects: Dialect[] = ["cronos"]): Promise<Record<string, Pick<CheckResult, "status" | "message">>> {
    const { report } = await runConformance({ facilitatorUrl: proxy.url, targets: [target], dialects, settle, rateLimit: false, only });
    return Object.fromEntries(report.results.map((result) => [name(result), { status: result.status, ...(result.message === undefined ? {} : { message: result.message }) }]));
  }

  const json = (status: number, body: unknown): ProxiedAnswer => ({ status, contentType: "application/json; charset=utf-8", body: JSON.stringify(body) });
  const answer = (call: ProxiedCall) => call.answer as Record<string, unknown>;

  it("a wrong reason text fails the check of that reason, saying what was expected and what came back", async () => {
    proxy.rewrite = (call) =>
      call.path.endsWith("/verify") && answer(call).invalidReason === "Invalid amount: 9999" ? json(200, { isValid: false, invalidReason: "Amount mismatch" }) : undefined;
    const results = await check(["verify.amount-below-price", "verify.expired"]);
    expect(results["verify.amount-below-price@cronos-testnet"]).to.deep.equal({
      status: "failed",
      message: 'expected verify\'s refusal {isValid: false, invalidReason: "Invalid amount: 9999"}, got HTTP 200 application/json {"isValid":false,"invalidReason":"Amount mismatch"}',
    });
    expect(results["verify.expired@cronos-testnet"]).to.deep.equal({ status: "passed" });
  });

  it("a wrong status fails the checks it touches: refusals answered 400 instead of 200", async () => {
    proxy.rewrite = (call) => (call.path.endsWith("/verify") && answer(call).isValid === false ? json(400, answer(call)) : undefined);
    const results = await check(["verify.expired", "verify.accepts"]);
    expect(results["verify.expired@cronos-testnet"]).to.deep.equal({
      status: "failed",
      message: 'expected verify\'s refusal {isValid: false, invalidReason: "Authorization expired"}: HTTP 200, got HTTP 400 application/json {"isValid":false,"invalidReason":"Authorization expired"}',
    });
    expect(results["verify.accepts@cronos-testnet"]).to.deep.equal({ status: "passed" });
  });

  it("a settle answer without blockNumber fails settle.pays, naming the field", async () => {
    proxy.rewrite = (call) => {
      if (!call.path.endsWith("/settle") || answer(call).event !== "payment.settled") return undefined;
      const { blockNumber: _dropped, ...rest } = answer(call);
      return json(200, rest);
    };
    const results = await check(["settle.pays", "settle.on-chain"], true);
    expect(results["settle.pays@cronos-testnet"]!.status).to.equal("failed");
    expect(results["settle.pays@cronos-testnet"]!.message).to.match(
      /^expected settle's payment\.settled with x402Version, txHash, from, to, value \(strings\), blockNumber \(a number\), network and an ISO timestamp, got blockNumber Invalid input: expected number, received undefined in \{"x402Version":1,"event":"payment.settled",/,
    );
    expect(results["settle.on-chain@cronos-testnet"]).to.deep.equal({ status: "skipped", message: "settle.pays did not settle a payment to build on" });
  });

  it("a facilitator that answers a replay with the first settlement fails the replay check", async () => {
    // Remembers each settled header and answers it again as settled (the kit refuses: already used).
    const settled = new Map<string, string>();
    proxy.rewrite = (call) => {
      if (!call.path.endsWith("/settle")) return undefined;
      const header = (call.body as { paymentHeader: string }).paymentHeader;
      if (answer(call).event === "payment.settled") settled.set(header, JSON.stringify(answer(call)));
      else if (settled.has(header)) return { status: 200, contentType: "application/json", body: settled.get(header)! };
      return undefined;
    };
    const results = await check(["settle.pays", "settle.replay", "verify.replay"], true);
    expect(results["settle.pays@cronos-testnet"]).to.deep.include({ status: "passed" });
    expect(results["settle.replay@cronos-testnet"]!.status).to.equal("failed");
    expect(results["settle.replay@cronos-testnet"]!.message).to.match(
      /^expected settle's payment\.failed with error "Authorization already used", got HTTP 200 application\/json \{.*"event":"payment\.settled"/,
    );
    expect(results["verify.replay@cronos-testnet"]).to.deep.equal({ status: "passed" });
  });

  it("in x402 v2: a reason of its own instead of @x402/evm's code, and a settlement named by the Cronos network, fail those checks in that dialect only", async () => {
    proxy.rewrite = (call) => {
      const body = answer(call);
      if (call.path.endsWith("/verify") && body.invalidReason === "invalid_exact_evm_payload_authorization_value_mismatch") return json(200, { ...body, invalidReason: "invalid_amount" });
      if (call.path.endsWith("/settle") && body.success === true) return json(200, { ...body, network: "cronos-testnet" });
      return undefined;
    };
    const results = await check(["verify.amount-below-price", "settle.pays"], true, ["cronos", "x402-v2"]);
    expect(results["verify.amount-below-price@cronos-testnet"]).to.deep.equal({ status: "passed" });
    expect(results["settle.pays@cronos-testnet"]!.status).to.equal("passed");
    expect(results["verify.amount-below-price@eip155:338"]!.status).to.equal("failed");
    expect(results["verify.amount-below-price@eip155:338"]!.message).to.match(
      /^expected verify's refusal \{isValid: false, invalidReason: "invalid_exact_evm_payload_authorization_value_mismatch"\}, got HTTP 200 application\/json \{"isValid":false,"invalidReason":"invalid_amount",/,
    );
    expect(results["settle.pays@eip155:338"]!.status).to.equal("failed");
    expect(results["settle.pays@eip155:338"]!.message).to.match(
      /^expected settle's success \{success: true, payer, transaction, network: "eip155:338"\}, got network cronos-testnet \(expected eip155:338, as sent\) in HTTP 200 /,
    );
  });

  it("an HTML page for a body that is not JSON fails the not-JSON checks of verify and settle", async () => {
    const html = "<html><body><h1>400 Bad Request</h1></body></html>";
    proxy.rewrite = (call) => (call.status === 400 && typeof call.body === "string" ? { status: 400, contentType: "text/html", body: html } : undefined);
    const results = await check(["verify.body-not-json", "settle.body-not-json", "verify.field-missing"]);
    expect(results["verify.body-not-json"]).to.deep.equal({
      status: "failed",
      message: `expected verify's refusal {isValid: false, invalidReason: a text starting "Invalid request: "}: a JSON answer (Content-Type application/json), got HTTP 400 text/html "${html}"`,
    });
    expect(results["settle.body-not-json"]!.status).to.equal("failed");
    expect(results["verify.field-missing"]).to.deep.equal({ status: "passed" });
  });

  it("the command exits 1 against a wrong facilitator, and its JUnit file counts the same failures as its lines", async () => {
    proxy.rewrite = (call) => {
      if (call.path.endsWith("/verify") && answer(call).invalidReason === "Invalid amount: 9999") return json(200, { isValid: false, invalidReason: "Amount mismatch" });
      if (call.status === 400 && typeof call.body === "string") return { status: 400, contentType: "text/html", body: "<html>no</html>" };
      return undefined;
    };
    const dir = await mkdtemp(join(tmpdir(), "conformance-wrong-"));
    try {
      const junit = join(dir, "wrong.xml");
      const { status, stdout, stderr } = await conformance([
        "--facilitator", proxy.url, "--network", "cronos-testnet", "--only", "health.shape,verify.body-not-json,verify.amount-*@cronos-testnet,verify.expired@cronos-testnet", "--junit", junit,
      ]);
      expect(status, stderr).to.equal(1);
      const lines = checkLines(stdout);
      expect(lines.map((line) => line.slice(0, 4) + " " + line.split(/\s+/)[1])).to.deep.equal([
        "PASS health.shape",
        "FAIL verify.body-not-json",
        "FAIL verify.amount-below-price@cronos-testnet",
        "PASS verify.amount-zero@cronos-testnet",
        "PASS verify.expired@cronos-testnet",
      ]);
      expect(lines[2]).to.include('got HTTP 200 application/json {"isValid":false,"invalidReason":"Amount mismatch"}');
      expect(stdout).to.match(/\n5 checks: 3 passed, 2 failed, 0 skipped in [\d.]+ s; http:\/\/127\.0\.0\.1:\d+ does NOT conform/);
      const root = parseXml(await readFile(junit, "utf8"));
      expect(root.attributes).to.include({ tests: "5", failures: "2", skipped: "0" });
      expect(findAll(root, "failure").map((failure) => failure.attributes.message)).to.deep.equal([lines[1]!.split("]: ")[1], lines[2]!.split("]: ")[1]]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
