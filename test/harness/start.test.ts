import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { z } from "zod";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { parseStartArgs, UsageError } from "../../src/harness/cli.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { occupyPort, portIsFree } from "../helpers/http.js";
import { spawnInRoot, type SpawnOptions } from "../helpers/processes.js";
import { rpc } from "../helpers/rpc.js";
import { thrown } from "../helpers/reject.js";

const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/);
const networkLine = z.strictObject({
  chainId: z.number().int(),
  viemChain: z.enum(["cronosTestnet", "cronos"]),
  rpcUrl: z.url(),
  wsUrl: z.string().regex(/^ws:\/\/127\.0\.0\.1:\d+$/),
  token: address,
  domain: z.strictObject({ name: z.string(), version: z.string() }),
  buyers: z.array(z.strictObject({ address, privateKey: z.string().regex(/^0x[0-9a-f]{64}$/) })).min(1),
});
/** The `--json` line, as documented: nothing more, nothing less. */
const jsonLine = z.strictObject({
  facilitatorUrl: z.url(),
  harnessUrl: z.string().regex(/^http:\/\/127\.0\.0\.1:\d+\/harness$/),
  relayer: address,
  networks: z.strictObject({ "cronos-testnet": networkLine.optional(), "cronos-mainnet": networkLine.optional() }),
});

function usageError(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  return thrown(() => parseStartArgs(argv, env), UsageError, argv.join(" ")).message;
}

describe("npm start options (src/harness/cli.ts)", function () {
  it("defaults to both networks, port 8402, RPC ports 8545/8546, automine, 3 buyers of 1,000 USDC.e, no rate limits", () => {
    const { stack, json, help } = parseStartArgs([], {});
    expect({ json, help }).to.deep.equal({ json: false, help: false });
    expect(stack).to.deep.include({ networks: ["cronos-testnet", "cronos-mainnet"], port: 8402, blockTimeMs: 0, buyers: 3, buyerBalance: 1_000_000_000n });
    expect(stack.rpcPorts).to.deep.equal({ "cronos-testnet": 8545, "cronos-mainnet": 8546 });
    expect(stack.rateLimits).to.deep.equal({ verifyPerMinute: 0, settlePerMinute: 0 });
    expect(stack.fork).to.deep.equal({});
  });

  it("reads variables, and a flag wins over its variable", () => {
    const env = { PORT: "9000", NETWORKS: "mainnet", BUYERS: "5", BUYER_BALANCE: "2.5", RATE_LIMIT_SETTLE_PER_MINUTE: "7", FORK_MAINNET_URL: "http://127.0.0.1:1234" };
    const { stack } = parseStartArgs(["--port", "9001", "--json", "--block-time=250"], env);
    expect(stack).to.deep.include({ port: 9001, networks: ["cronos-mainnet"], buyers: 5, buyerBalance: 2_500_000n, blockTimeMs: 250 });
    expect(stack.rateLimits).to.deep.equal({ verifyPerMinute: 0, settlePerMinute: 7 });
    expect(stack.fork).to.deep.equal({ "cronos-mainnet": "http://127.0.0.1:1234" });
    expect(stack.rpcPorts).to.deep.equal({ "cronos-mainnet": 8546 });
  });

  it('takes --block-time cronos (or BLOCK_TIME_MS=cronos) as the real networks\' 500 ms blocks', () => {
    expect(parseStartArgs(["--block-time", "cronos"], {}).stack.blockTimeMs).to.equal(500);
    expect(parseStartArgs([], { BLOCK_TIME_MS: "cronos" }).stack.blockTimeMs).to.equal(500);
    expect(parseStartArgs(["--block-time=0"], { BLOCK_TIME_MS: "cronos" }).stack.blockTimeMs).to.equal(0);
    expect(usageError(["--block-time", "fast"])).to.equal('--block-time: must be "cronos" or an integer from 0 to 3600000, got "fast"');
    expect(usageError([], { BLOCK_TIME_MS: "Cronos" })).to.match(/^BLOCK_TIME_MS: must be "cronos" or an integer/);
  });

  it("answers as a Cronos node unless --node ethereum (CHAIN_NODE); --fee-bump and --min-gas-price (gwei) go with cronos only", () => {
    expect(parseStartArgs([], {}).stack).to.deep.include({ node: "cronos", cronos: { feeBump: 10, minGasPrice: 0n } });
    expect(parseStartArgs(["--node", "ethereum"], {}).stack.node).to.equal("ethereum");
    expect(parseStartArgs([], { CHAIN_NODE: "ethereum" }).stack.node).to.equal("ethereum");
    expect(parseStartArgs(["--fee-bump", "0", "--min-gas-price", "0.5"], { CRONOS_FEE_BUMP: "25" }).stack.cronos).to.deep.equal({ feeBump: 0, minGasPrice: 500_000_000n });
    expect(parseStartArgs([], { CRONOS_MIN_GAS_PRICE_GWEI: "10000" }).stack.cronos).to.deep.equal({ feeBump: 10, minGasPrice: 10_000_000_000_000n });
    expect(usageError(["--node", "geth"])).to.equal('--node: must be cronos or ethereum, got "geth"');
    expect(usageError(["--fee-bump", "1001"])).to.match(/^--fee-bump: must be an integer from 0 to 1000/);
    expect(usageError(["--min-gas-price", "1e9"])).to.match(/^--min-gas-price: must be gwei/);
    expect(usageError(["--node", "ethereum", "--fee-bump", "20"])).to.equal("--fee-bump (CRONOS_FEE_BUMP) goes with --node cronos: a Cronos node's setting");
    expect(usageError([], { CHAIN_NODE: "ethereum", CRONOS_MIN_GAS_PRICE_GWEI: "1" })).to.equal("--min-gas-price (CRONOS_MIN_GAS_PRICE_GWEI) goes with --node cronos: a Cronos node's setting");
  });

  it("rejects bad options with one line naming the flag or variable", () => {
    expect(usageError(["--port", "http"])).to.match(/^--port: .*got "http"$/);
    expect(usageError([], { PORT: "70000" })).to.match(/^PORT: /);
    expect(usageError(["--nope"])).to.contain("--nope");
    expect(usageError(["--networks", "ethereum"])).to.contain('unknown network "ethereum"');
    expect(usageError(["--buyers=-1"])).to.match(/^--buyers: /);
    expect(usageError(["--buyer-balance", "1e3"])).to.match(/^--buyer-balance: /);
    expect(usageError(["--fork-testnet", "ws://x"])).to.match(/^--fork-testnet: /);
    expect(usageError(["--networks", "cronos-testnet", "--fork-mainnet", "http://x"])).to.match(/^--fork-mainnet: /);
    expect(usageError(["--port", "8545"])).to.contain("--testnet-rpc-port");
    for (const message of [usageError(["--port", "x"]), usageError(["positional"])]) expect(message).to.not.contain("\n");
  });
});

/**
 * Runs `tsx scripts/start.ts ...args` as a separate process, as a CI suite in another language would
 * run `npm start -- --json`.
 */
const startScript = (args: readonly string[], env: NodeJS.ProcessEnv = {}, options: SpawnOptions = {}) => spawnInRoot("tsx", ["scripts/start.ts", ...args], env, options);

describe("npm start as a separate process (scripts/start.ts)", function () {
  this.timeout(90_000);

  it("--json prints exactly one JSON line when ready, serves what it names, and stops cleanly on SIGTERM; --write-env writes what it names in the foreground too", async () => {
    const envDir = mkdtempSync(join(tmpdir(), "x402-start-env-"));
    const envFile = join(envDir, "stack.env");
    const proc = startScript(["--json", "--write-env", envFile, "--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0", "--buyers", "2"]);
    try {
      const line = await proc.firstLine(60_000);
      const summary = jsonLine.parse(JSON.parse(line));
      // Written before the ready line: what the line names, as NAME=value lines.
      const testnet = summary.networks["cronos-testnet"]!;
      expect(readFileSync(envFile, "utf8").split("\n").slice(0, 11)).to.deep.equal([
        `FACILITATOR_URL=${summary.facilitatorUrl}`,
        `HARNESS_URL=${summary.harnessUrl}`,
        "NETWORK=cronos-testnet",
        "CHAIN_ID=338",
        `RPC_URL=${testnet.rpcUrl}`,
        `WS_URL=${testnet.wsUrl}`,
        `TOKEN_ADDRESS=${testnet.token}`,
        // The token's EIP-712 domain, as the line's (its name single-quoted: it has spaces).
        `TOKEN_NAME='${testnet.domain.name}'`,
        `TOKEN_VERSION=${testnet.domain.version}`,
        `BUYER_ADDRESS=${testnet.buyers[0]!.address}`,
        `BUYER_PRIVATE_KEY=${testnet.buyers[0]!.privateKey}`,
      ]);
      expect(Object.keys(summary.networks)).to.have.members(["cronos-testnet", "cronos-mainnet"]);
      for (const [name, network] of Object.entries(summary.networks)) {
        const info = NETWORKS[name as keyof typeof NETWORKS];
        expect(network).to.deep.include({ chainId: info.chainId, viemChain: name === "cronos-testnet" ? "cronosTestnet" : "cronos", token: info.token, domain: info.domain });
        expect(network!.buyers).to.have.length(2);
        expect(Number.parseInt(await rpc<string>(network!.rpcUrl, "eth_chainId"), 16)).to.equal(info.chainId);
        expect(new URL(network!.wsUrl).port).to.equal(new URL(network!.rpcUrl).port);
      }
      const supported = await fetch(`${summary.facilitatorUrl}/v2/x402/supported`);
      expect(supported.status).to.equal(200);
      const kinds = ((await supported.json()) as { kinds: Array<{ network: string }> }).kinds.map((k) => k.network);
      expect(kinds).to.have.members(["cronos-testnet", "cronos-mainnet", "eip155:338", "eip155:25"]);
      expect(proc.stderr()).to.contain("ready in");
      // Nothing else on stdout, even after requests were served.
      expect(proc.stdout()).to.equal(`${line}\n`);

      proc.child.kill("SIGTERM");
      expect(await proc.exited).to.equal(0);
      expect(proc.stdout()).to.equal(`${line}\n`);
      const ports = [summary.facilitatorUrl, ...Object.values(summary.networks).map((n) => n!.rpcUrl)].map((url) => Number(new URL(url).port));
      for (const port of ports) expect(await portIsFree(port), `port ${port} free after exit`).to.equal(true);
    } finally {
      proc.child.kill("SIGKILL");
      rmSync(envDir, { recursive: true, force: true });
    }
  });

  it("keeps serving when its parent reads stdout only and never stderr", async () => {
    const proc = startScript(["--json", "--port", "0", "--testnet-rpc-port", "0", "--networks", "testnet"], {}, { readStderr: false });
    try {
      const summary = jsonLine.parse(JSON.parse(await proc.firstLine(60_000)));
      const network = summary.networks["cronos-testnet"]!;
      const requirements = { scheme: "exact", network: "cronos-testnet", payTo: summary.relayer as Address, asset: network.token, maxAmountRequired: "1", maxTimeoutSeconds: 300 };
      const signer = privateKeyToAccount(network.buyers[0]!.privateKey as Hex);
      // Each verify logs a line on stderr: 600 of them are far more than a pipe buffer (64 KiB) holds.
      for (let i = 0; i < 600; i++) {
        const paymentHeader = await createPaymentHeader({ signer, requirements });
        const response = await fetch(`${summary.facilitatorUrl}/v2/x402/verify`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ x402Version: 1, paymentHeader, paymentRequirements: requirements }),
          signal: AbortSignal.timeout(5_000),
        });
        expect(response.status).to.equal(200);
        await response.text();
      }
      proc.child.kill("SIGTERM");
      expect(await proc.exited).to.equal(0);
    } finally {
      proc.child.kill("SIGKILL");
    }
  });

  it("exits 1 with a message naming the port and its flag and variable when a port is taken", async () => {
    const holder = await occupyPort();
    try {
      const proc = startScript(["--json", "--port", "0", "--testnet-rpc-port", String(holder.port), "--mainnet-rpc-port", "0"]);
      expect(await proc.exited).to.equal(1);
      expect(proc.stdout()).to.equal("");
      const message = proc.stderr().trim().split("\n").at(-1)!;
      expect(message).to.contain(`port ${holder.port}`);
      expect(message).to.contain("--testnet-rpc-port");
      expect(message).to.contain("TESTNET_RPC_PORT");
    } finally {
      await holder.release();
    }
  });

  it("exits 2 with one line for a bad flag", async () => {
    const proc = startScript(["--json", "--buyers", "many"]);
    expect(await proc.exited).to.equal(2);
    expect(proc.stdout()).to.equal("");
    expect(proc.stderr().trim()).to.match(/^error: --buyers: [^\n]+$/);
  });

  it("shows a fork URL by scheme and host only: its path and query may hold an RPC provider's key", async () => {
    // Port 2: privileged and unassigned, nothing listens there, so the fork fails at once.
    const proc = startScript(["--fork-testnet", "http://user:pw@127.0.0.1:2/v2/FORK-SECRET?key=QUERY-SECRET", "--networks", "cronos-testnet", "--port", "0", "--testnet-rpc-port", "0"]);
    expect(await proc.exited).to.equal(1);
    expect(proc.stderr()).to.equal(
      "[start] cronos-testnet: starting chain 338, forking http://127.0.0.1:2\nerror: start-up failed: cronos-testnet: cannot fork http://127.0.0.1:2: ECONNREFUSED\n",
    );
  });
});
