import { expect } from "chai";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { NETWORKS } from "../../src/protocol/networks.js";
import { startLocalChain, type LocalChain } from "../../src/harness/chain.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { waitUntil } from "../helpers/wait.js";
import { listen } from "../helpers/http.js";
import { setAutomine } from "../helpers/mining.js";
import { ROOT, spawnInRoot, type Spawned } from "../helpers/processes.js";
import { startFaultProxy } from "../helpers/rpc-proxy.js";

/** Starts `npm run facilitator`'s script with `env` as its whole environment (besides PATH and HOME). */
function startFacilitatorScript(env: Record<string, string>): Spawned {
  return spawnInRoot("tsx", ["scripts/facilitator.ts"], env, { inheritEnv: false });
}

interface Run {
  code: number | NodeJS.Signals;
  stdout: string;
  stderr: string;
}

/** Runs the script with `env` until it exits (start-up failures exit at once). */
async function runToExit(env: Record<string, string>): Promise<Run> {
  const proc = startFacilitatorScript(env);
  await waitUntil("the script to exit", () => proc.child.exitCode !== null || proc.child.signalCode !== null);
  const code = await proc.exited;
  return { code, stdout: proc.stdout(), stderr: proc.stderr() };
}

/** The facilitator's "listening" log line, once it is written. */
async function listeningLine(proc: Spawned): Promise<{ url: string; networks: Array<{ rpc: string }> }> {
  return JSON.parse((await proc.waitFor(/^.*"msg":"facilitator listening".*\n/m, 30_000))[0]) as { url: string; networks: Array<{ rpc: string }> };
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

describe("the facilitator process against a local node (start-up checks, secrets, shutdown)", () => {
  let chain: LocalChain;
  let base: Record<string, string>;
  before(async () => {
    chain = await startLocalChain({ network: "cronos-testnet", port: 0, buyers: 1 });
    base = { CRONOS_TESTNET_RPC_URL: chain.rpcUrl, RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, PORT: "0", METRICS_PORT: "0", LOG_LEVEL: "info", LEDGER_FILE: ":memory:" };
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

  it("stops at start-up when the RPC does not answer, naming its host (never the key in its path or query) and the cause", async () => {
    const secret = "/v2/PATH-SECRET-KEY?apikey=QUERY-SECRET-KEY";
    const line = (host: string, cause: string) => `facilitator: start-up check failed: cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC at ${host} does not answer (${cause})\n`;
    // Port 2: privileged, unassigned, on no browser's blocked list; nothing listens there.
    const refused = await runToExit({ ...base, CRONOS_TESTNET_RPC_URL: `http://127.0.0.1:2${secret}`, RPC_TIMEOUT_MS: "500" });
    expect([refused.code, refused.stderr]).to.deep.equal([1, line("http://127.0.0.1:2", "connection refused")]);
    const unknownHost = await runToExit({ ...base, CRONOS_TESTNET_RPC_URL: `https://user:password@rpc.example.invalid${secret}`, RPC_TIMEOUT_MS: "2000" });
    expect(unknownHost.code).to.equal(1);
    expect(unknownHost.stderr).to.match(new RegExp(`^${escape(line("https://rpc.example.invalid", "DNS lookup failed, XXX")).replace("XXX", "(ENOTFOUND|EAI_AGAIN)")}$`));
    const silent = await listen(() => {});
    try {
      const slow = await runToExit({ ...base, CRONOS_TESTNET_RPC_URL: `${silent.url}${secret}`, RPC_TIMEOUT_MS: "300" });
      expect([slow.code, slow.stderr]).to.deep.equal([1, line(silent.url, "no answer within 300 ms")]);
    } finally {
      await silent.close();
    }
    for (const run of [refused, unknownHost]) expect(run.stderr + run.stdout).not.to.match(/SECRET|password/);
  });

  it("never starts local chains: no RPC URL, an unreadable key file or an unknown CRONOS_/RELAYER_ variable stops it with one line", async () => {
    const refusals: Array<[Record<string, string>, string]> = [
      [{ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer }, "CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL: no network configured; set at least one RPC URL (or run `cronos-x402 start`, `npm start` in the kit's clone, for the embedded local chains)"],
      [{ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_MAINNET_RPC: chain.rpcUrl }, `CRONOS_MAINNET_RPC: unknown variable; did you mean CRONOS_MAINNET_RPC_URL? (the facilitator stops at a variable that looks like one of its own; if CRONOS_MAINNET_RPC is meant for something else, name it in UNCHECKED_VARIABLES)`],
      [{ ...base, RELAYER_PRIVATE_KEY: "", RELAYER_PRIVATE_KEY_FILE: "/nonexistent/relayer-key" }, "RELAYER_PRIVATE_KEY_FILE: cannot read /nonexistent/relayer-key (ENOENT)"],
      [{ ...base, RELAYER_PRIVATE_KEY: "", RELAYER_PRIVATE_KEY_FILE: ROOT }, `RELAYER_PRIVATE_KEY_FILE: cannot read ${ROOT} (EISDIR)`],
      [{ ...base, RELAYER_KEY_FILE: "/run/secrets/key" }, `RELAYER_KEY_FILE: unknown variable; did you mean RELAYER_PRIVATE_KEY_FILE? (the facilitator stops at a variable that looks like one of its own; if RELAYER_KEY_FILE is meant for something else, name it in UNCHECKED_VARIABLES)`],
      [{ ...base, TRUST_PROXY: "true" }, 'TRUST_PROXY: "true" would trust every X-Forwarded-For entry, so any client could pick its rate-limit key; give the number of proxies in front (e.g. 1) or their addresses/subnets (e.g. loopback or 10.0.0.0/8)'],
    ];
    for (const [env, message] of refusals) {
      const run = await runToExit(env);
      expect([run.code, run.stdout, run.stderr]).to.deep.equal([1, "", `facilitator: configuration: ${message}\n`]);
    }
  });

  it("npm run facilitator with no RPC URL exits 1 with that line, starting nothing", async () => {
    const npm = spawnInRoot("npm", ["run", "--silent", "facilitator"], { RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer }, { inheritEnv: false });
    expect([await npm.exited, npm.stdout()]).to.deep.equal([1, ""]);
    expect(npm.stderr().split("\n").filter((l) => l.startsWith("facilitator:") || l.startsWith("[start]"))).to.deep.equal([
      "facilitator: configuration: CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL: no network configured; set at least one RPC URL (or run `cronos-x402 start`, `npm start` in the kit's clone, for the embedded local chains)",
    ]);
  });

  it("keeps an RPC URL's path and query (its API key) out of logs, healthcheck and answers while the RPC fails", async () => {
    // A forwarder that resets every connection once the fault is set.
    const rpc = await startFaultProxy(chain.rpcUrl);
    const secretUrl = `${rpc.url}/v2/PATH-SECRET-KEY?apikey=QUERY-SECRET-KEY`;
    const proc = startFacilitatorScript({ ...base, CRONOS_TESTNET_RPC_URL: secretUrl, RPC_TIMEOUT_MS: "1000" });
    try {
      const listening = await listeningLine(proc);
      expect(listening.networks.map((n) => n.rpc)).to.deep.equal([rpc.url]);
      const payment = await makePayment(
        { publicClient: chain.publicClient, info: NETWORKS["cronos-testnet"], token: chain.token },
        { payer: privateKeyToAccount(chain.buyers[0]!.privateKey) },
      );
      rpc.fail({ kind: "reset" });
      const post = (route: string) =>
        fetch(`${listening.url}/v2/x402/${route}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payment.body) });
      const [verify, settle, health] = await Promise.all([post("verify"), post("settle"), fetch(`${listening.url}/healthcheck`)]);
      expect([verify.status, settle.status, health.status]).to.deep.equal([500, 503, 503]);
      const healthBody = (await health.json()) as { results: { message: string } };
      expect(healthBody.results.message).to.equal(`cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC at ${rpc.url} does not answer (connection reset)`);
      const answers = JSON.stringify([await verify.json(), await settle.json(), healthBody]);
      proc.child.kill("SIGTERM");
      await proc.exited;
      expect(proc.stdout()).to.include('"msg":"request fault"');
      expect(answers + proc.stdout() + proc.stderr()).not.to.match(/SECRET/);
    } finally {
      proc.kill();
      await rpc.close();
    }
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
    const proc = startFacilitatorScript({ ...base, RATE_LIMIT_SETTLE_PER_MINUTE: "0" });
    const lines = () => proc.stdout().split("\n").filter((line) => line !== "");
    try {
      const listening = await listeningLine(proc);
      const health = await fetch(`${listening.url}/healthcheck`);
      expect(health.status).to.equal(200);

      // A settle that cannot confirm until we mine: automine off.
      await setAutomine(chain.provider, false);
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
      await waitUntil("the settle transaction in the node's pool", async () => {
        const pending = (await chain.provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })) as { transactions: string[] };
        return pending.transactions.length > 0;
      });
      proc.child.kill("SIGTERM");
      // Mine only once the process has taken the signal: the settle is then in flight during shutdown.
      await proc.waitFor(/"msg":"stopping/, 30_000);
      await chain.provider.request({ method: "evm_mine", params: [] });
      const answer = (await (await settling).json()) as { event: string };
      expect(answer.event).to.equal("payment.settled");
      expect(await proc.exited).to.equal(0);
      const logged = lines().map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(logged.some((l) => l.route === "settle" && l.outcome === "settled" && l.network === "cronos-testnet")).to.equal(true);
      const stopLines = logged.map((l) => l.msg).filter((msg) => msg === "stopped" || String(msg).startsWith("stopping"));
      expect(stopLines).to.deep.equal(["stopping: no new requests, letting settles in flight finish", "stopped"]);
      expect(logged.at(-1)?.msg).to.equal("stopped");
      expect(proc.stdout()).not.to.include(HARDHAT_KEYS.relayer.slice(2));
    } finally {
      await setAutomine(chain.provider, true);
      proc.kill();
    }
  });
});
