import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import { expect } from "chai";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { NETWORKS } from "../../src/protocol/networks.js";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";

const TSX = new URL("../../node_modules/.bin/tsx", import.meta.url).pathname;
const ROOT = new URL("../../", import.meta.url).pathname;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `npm run facilitator`'s script with `env` until it exits (start-up failures exit at once). */
async function runToExit(env: Record<string, string>): Promise<Run> {
  const child = spawn(TSX, ["scripts/facilitator.ts"], { cwd: ROOT, env: { PATH: process.env.PATH ?? "", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  const [code] = (await once(child, "exit")) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe("the facilitator process against a local node (start-up checks, secrets, shutdown)", () => {
  let chain: LocalChain;
  let base: Record<string, string>;
  before(async () => {
    chain = await startLocalChain({ network: "cronos-testnet", port: 0, buyers: 1 });
    base = { CRONOS_TESTNET_RPC_URL: chain.rpcUrl, RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, PORT: "0", METRICS_PORT: "0", LOG_LEVEL: "info" };
  });
  after(() => chain.stop());

  const refusals: Array<[string, Record<string, string>, (chain: LocalChain) => string]> = [
    ["a wrong chain id", { CRONOS_TESTNET_RPC_URL: "", CRONOS_MAINNET_RPC_URL: "<rpc>" }, () => "cronos-mainnet: CRONOS_MAINNET_RPC_URL: the RPC reports chain id 338, expected 25"],
    ["no token at the address", { CRONOS_TESTNET_TOKEN_ADDRESS: "0x000000000000000000000000000000000000dEaD" }, () => "cronos-testnet: CRONOS_TESTNET_TOKEN_ADDRESS: no contract at 0x000000000000000000000000000000000000dEaD on chain 338"],
    ["a token with another EIP-712 version", { CRONOS_TESTNET_TOKEN_VERSION: "2" }, () => `cronos-testnet: CRONOS_TESTNET_TOKEN_VERSION: the token's EIP-712 version is "1", configured "2"`],
    ["a token with another EIP-712 name", { CRONOS_TESTNET_TOKEN_NAME: "Bridged USDC" }, () => `cronos-testnet: CRONOS_TESTNET_TOKEN_NAME: the token's EIP-712 name is "Bridged USDC (Stargate)", configured "Bridged USDC"`],
  ];
  for (const [what, env, line] of refusals) {
    it(`stops at start-up with one line naming the variable for ${what}`, async () => {
      const resolved = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, v === "<rpc>" ? chain.rpcUrl : v]));
      const run = await runToExit({ ...base, ...resolved });
      expect(run.code).to.equal(1);
      expect(run.stderr).to.equal(`facilitator: start-up check failed: ${line(chain)}\n`);
    });
  }

  it("stops at start-up when the relayer has no gas, naming its address and never its key", async () => {
    const key = generatePrivateKey();
    const run = await runToExit({ ...base, RELAYER_PRIVATE_KEY: key });
    expect(run.code).to.equal(1);
    expect(run.stderr).to.match(/^facilitator: start-up check failed: cronos-testnet: RELAYER_PRIVATE_KEY: relayer 0x[0-9a-fA-F]{40} holds 0 wei of gas, below RELAYER_MIN_BALANCE_WEI 1\n$/);
    expect(run.stderr + run.stdout).not.to.include(key.slice(2));
  });

  it("stops at start-up when the RPC does not answer", async () => {
    const run = await runToExit({ ...base, CRONOS_TESTNET_RPC_URL: `http://127.0.0.1:${await freePort()}`, RPC_TIMEOUT_MS: "500" });
    expect(run.code).to.equal(1);
    expect(run.stderr).to.match(/^facilitator: start-up check failed: cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC does not answer \(.+\)\n$/);
  });

  it("refuses a malformed key or a missing one without echoing it", async () => {
    const bad = await runToExit({ ...base, RELAYER_PRIVATE_KEY: "0xnot-a-key-but-a-secret" });
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.equal("facilitator: configuration: RELAYER_PRIVATE_KEY: key #1 is not a 32-byte hex private key\n");
    const missing = await runToExit({ ...base, RELAYER_PRIVATE_KEY: "" });
    expect(missing.stderr).to.equal(
      "facilitator: configuration: RELAYER_PRIVATE_KEY: required (the key that sends settle transactions), or RELAYER_PRIVATE_KEY_FILE\n",
    );
    const port = await runToExit({ ...base, PORT: "http" });
    expect(port.stderr).to.equal('facilitator: configuration: PORT: must be an integer from 0 to 65535, got "http"\n');
  });

  it("starts on the right chain, logs JSON without secrets, and on SIGTERM lets a settle in flight finish, then exits 0", async () => {
    const child = spawn(TSX, ["scripts/facilitator.ts"], { cwd: ROOT, env: { PATH: process.env.PATH ?? "", ...base, RATE_LIMIT_SETTLE_PER_MINUTE: "0" }, stdio: ["ignore", "pipe", "pipe"] });
    const lines: string[] = [];
    const reader = createInterface({ input: child.stdout });
    reader.on("line", (line) => lines.push(line));
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    try {
      const listening = await new Promise<{ url: string }>((resolve, reject) => {
        reader.on("line", (line) => {
          const entry = JSON.parse(line) as { msg: string; url: string };
          if (entry.msg === "facilitator listening") resolve(entry);
        });
        child.once("exit", (code) => reject(new Error(`exited ${code}: ${stderr}`)));
      });
      const health = await fetch(`${listening.url}/healthcheck`);
      expect(health.status).to.equal(200);

      // A settle that cannot confirm until we mine: automine off.
      await chain.provider.request({ method: "evm_setAutomine", params: [false] });
      const payment = await makePayment(
        { publicClient: chain.publicClient, info: NETWORKS["cronos-testnet"], token: chain.token },
        { payer: privateKeyToAccount(chain.buyers[0]!.privateKey) },
      );
      const settling = fetch(`${listening.url}/v2/x402/settle`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X402-Version": "1" },
        body: JSON.stringify(payment.body),
      });
      // Wait until the transaction is in the node's pool, then ask the process to stop.
      for (let i = 0; i < 100; i++) {
        const pending = (await chain.provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })) as { transactions: string[] };
        if (pending.transactions.length > 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      child.kill("SIGTERM");
      await new Promise((r) => setTimeout(r, 300));
      await chain.provider.request({ method: "evm_mine", params: [] });
      const answer = (await (await settling).json()) as { event: string };
      expect(answer.event).to.equal("payment.settled");
      const stopping = Date.now();
      const [code] = await once(child, "exit");
      expect(code).to.equal(0);
      expect(Date.now() - stopping).to.be.below(5_000);
      const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(logged.some((l) => l.route === "settle" && l.outcome === "settled" && l.network === "cronos-testnet")).to.equal(true);
      expect(logged.at(-1)?.msg).to.equal("stopped");
      expect(lines.join("\n")).not.to.include(HARDHAT_KEYS.relayer.slice(2));
    } finally {
      await chain.provider.request({ method: "evm_setAutomine", params: [true] });
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
