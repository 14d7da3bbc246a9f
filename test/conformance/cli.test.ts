import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { parseConformanceArgs, parseNetwork, runConformanceCommand, UsageError } from "../../src/conformance/cli.js";
import { closedPortUrl, listen } from "../helpers/http.js";
import { rejection } from "../helpers/reject.js";

/** Runs the command in this process and collects what it writes. */
async function run(argv: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const status = await runConformanceCommand(argv, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) });
  return { status, stdout, stderr };
}

async function usageError(argv: string[]): Promise<string> {
  return (await rejection(() => parseConformanceArgs(argv), UsageError, argv.join(" "))).message;
}

describe("npm run conformance: options", () => {
  let dir: string;
  const key = generatePrivateKey();
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "conformance-cli-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("reads the buyer key from a file, with or without 0x, skipping blank and # lines", async () => {
    const file = join(dir, "buyer.key");
    await writeFile(file, `# the test buyer\n\n  ${key.slice(2)}  \n`);
    const command = await parseConformanceArgs(["--facilitator", "http://127.0.0.1:9/", "--network", "cronos-testnet", "--buyer-key-file", file, "--settle"]);
    expect(command.buyerKey).to.equal(key);
    expect(command.facilitator).to.equal("http://127.0.0.1:9");
    expect(command.settle).to.equal(true);
    expect((await parseConformanceArgs(["--facilitator", "http://x.test", "--network", "eip155:338", "--buyer-key", key])).buyerKey).to.equal(key);
  });

  it("refuses a malformed key without repeating any of it", async () => {
    const broken = `${key.slice(0, -1)}z`;
    const file = join(dir, "broken.key");
    await writeFile(file, broken);
    for (const argv of [
      ["--facilitator", "http://x.test", "--network", "cronos-testnet", "--buyer-key", broken],
      ["--facilitator", "http://x.test", "--network", "cronos-testnet", "--buyer-key-file", file],
    ]) {
      const message = await usageError(argv);
      expect(message).to.match(/not a 32-byte hex private key \(its content is not shown\)$/);
      expect(message).to.not.include(broken.slice(2, 20));
      const { status, stdout, stderr } = await run(argv);
      expect(status).to.equal(2);
      expect(stdout + stderr).to.not.include(broken.slice(2, 20));
    }
    expect(await usageError(["--buyer-key-file", join(dir, "missing.key"), "--facilitator", "http://x.test", "--network", "cronos-testnet"])).to.equal(
      `--buyer-key-file: cannot read ${join(dir, "missing.key")} (ENOENT)`,
    );
  });

  it("asks for the network that --rpc, --buyer-key, --pay-to and --settle are for, and a key for --settle", async () => {
    expect(await usageError(["--facilitator", "http://x.test", "--rpc", "http://127.0.0.1:8545"])).to.match(/^--network: name the network/);
    expect(await usageError(["--facilitator", "http://x.test", "--settle"])).to.match(/^--network: name the network/);
    expect(await usageError(["--facilitator", "http://x.test", "--network", "cronos-testnet", "--settle"])).to.equal("--settle: needs a funded buyer key (--buyer-key-file PATH)");
    expect(await usageError(["--facilitator", "http://x.test", "--buyer-key", key, "--buyer-key-file", "k"])).to.equal("--buyer-key and --buyer-key-file: give one of them");
  });

  it("refuses an RPC, key or payTo without --facilitator: the local stack brings its own", async () => {
    expect(await usageError(["--rpc", "http://127.0.0.1:8545"])).to.equal("--rpc: only with --facilitator (the local stack brings its own chains and buyers)");
    expect(await usageError(["--pay-to", privateKeyToAccount(key).address])).to.match(/^--pay-to: only with --facilitator/);
  });

  it("refuses bad URLs, addresses, networks and unknown options, naming the option", async () => {
    expect(await usageError(["--facilitator", "ftp://x.test"])).to.equal('--facilitator: expected an http(s) URL, got "ftp://x.test"');
    expect(await usageError(["--facilitator", "http://x.test", "--network", "base-sepolia"])).to.match(/^--network: unknown network "base-sepolia"/);
    expect(await usageError(["--facilitator", "http://x.test", "--network", "cronos-testnet", "--pay-to", "0x1234"])).to.match(/^--pay-to: expected a 0x-prefixed 20-byte address/);
    expect(await usageError(["--bogus"])).to.match(/^Unknown option '--bogus'/);
    expect(await usageError(["positional"])).to.match(/positional/);
  });

  it("names networks as the facilitator, the docs and CAIP-2 do", () => {
    expect(["cronos-testnet", "testnet", "eip155:338", "cronos-mainnet", "cronos", "mainnet", "eip155:25", "eip155:1", "base"].map(parseNetwork)).to.deep.equal([
      "cronos-testnet",
      "cronos-testnet",
      "cronos-testnet",
      "cronos-mainnet",
      "cronos-mainnet",
      "cronos-mainnet",
      "cronos-mainnet",
      undefined,
      undefined,
    ]);
  });

  it("takes --dialect cronos, x402-v2 or both, and refuses another", async () => {
    expect((await parseConformanceArgs(["--dialect", "x402-v2"])).dialects).to.deep.equal(["x402-v2"]);
    expect((await parseConformanceArgs(["--dialect", "cronos,x402-v2", "--dialect", "cronos"])).dialects).to.deep.equal(["cronos", "x402-v2"]);
    expect(await usageError(["--dialect", "v3"])).to.equal('--dialect: unknown dialect "v3"; use cronos or x402-v2');
  });

  it("splits --only on commas and repetitions", async () => {
    expect((await parseConformanceArgs(["--only", "verify.*, settle.pays", "--only", "health.shape"])).only).to.deep.equal(["verify.*", "settle.pays", "health.shape"]);
  });

  it("answers --help on stdout with exit 0, a bad option on stderr with exit 2", async () => {
    const help = await run(["--help"]);
    expect(help.status).to.equal(0);
    expect(help.stdout).to.match(/^Usage: cronos-x402 conformance \[options\] {8}\(in the kit's clone: npm run conformance -- \[options\]\)\n/);
    expect(help.stdout).to.include("--buyer-key-file PATH");
    const bad = await run(["--network", "nowhere"]);
    expect(bad).to.deep.include({ status: 2, stdout: "" });
    expect(bad.stderr).to.match(/^error: --network: unknown network "nowhere"/);
  });

  it("sends a seller API key from --api-key-file on verify and settle only, and never prints it", async () => {
    const apiKey = `sk_${generatePrivateKey().slice(2, 34)}`;
    const file = join(dir, "api.key");
    await writeFile(file, `${apiKey}\n`);
    const seen: Array<{ method: string; url: string; authorization: string | undefined }> = [];
    const server = await listen((req, res) => {
      seen.push({ method: req.method!, url: req.url!, authorization: req.headers.authorization });
      req.resume();
      req.on("end", () => {
        const authorized = req.headers.authorization === `Bearer ${apiKey}`;
        res.writeHead(req.method === "GET" || authorized ? 200 : 401, { "content-type": "application/json" });
        res.end(JSON.stringify(req.method === "GET" ? { kinds: [] } : authorized ? { isValid: false, invalidReason: "Invalid Base64 paymentHeader" } : { error: "Unauthorized" }));
      });
    });
    try {
      const { status, stdout, stderr } = await run(["--facilitator", server.url, "--network", "cronos-testnet", "--api-key-file", file, "--only", "verify.header-not-base64"]);
      expect(status, stdout + stderr).to.equal(0);
      expect(seen).to.deep.equal([
        { method: "GET", url: "/v2/x402/supported", authorization: undefined },
        { method: "POST", url: "/v2/x402/verify", authorization: `Bearer ${apiKey}` },
      ]);
      expect(stdout + stderr).to.not.include(apiKey.slice(3));
      expect(await usageError(["--api-key-file", file])).to.equal("--api-key-file: only with --facilitator (the local stack brings its own chains and buyers)");
      await writeFile(file, "two words\n");
      expect(await usageError(["--facilitator", server.url, "--api-key-file", file])).to.equal(
        `--api-key-file ${file}: no API key on its first line (printable characters, no spaces; its content is not shown)`,
      );
    } finally {
      await server.close();
    }
  });

  it("exits 1 against a URL where nothing listens: the first check says so and the rest are not run", async () => {
    const url = await closedPortUrl();
    const { status, stdout, stderr } = await run(["--facilitator", url, "--only", "health.shape,supported.shape,verify.expired"]);
    expect(status).to.equal(1);
    expect(stderr).to.include("[conformance] cannot read supported");
    const lines = stdout.split("\n").filter((line) => /^(PASS|FAIL|SKIP) /.test(line));
    expect(lines).to.have.length(3);
    expect(lines[0]).to.match(/^FAIL  health\.shape\s+\[spec 4\.1; wire format › healthcheck\]: the facilitator did not answer: GET \/healthcheck: fetch failed \(ECONNREFUSED\)$/);
    expect(lines[1]).to.match(/^FAIL  supported\.shape .*: not run: the facilitator at http:\/\/127\.0\.0\.1:\d+ stopped answering/);
    expect(lines[2]).to.match(/^FAIL  verify\.expired@cronos-testnet .*: not run: /);
    expect(stdout).to.match(/\n3 checks: 0 passed, 3 failed, 0 skipped in [\d.]+ s; http:\/\/127\.0\.0\.1:\d+ does NOT conform/);
  });
});
