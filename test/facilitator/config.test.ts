import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { expect } from "chai";
import request from "supertest";
import { custom, parseSignature } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { readFileSync } from "node:fs";
import { CONFIG_VARIABLES, ConfigError, loadConfig } from "../../src/facilitator/config/index.js";
import { HARDHAT_KEYS, makePayment, openFacilitator, startFacilitatorOnChain } from "../helpers/facilitator.js";
import { withoutTimestamp } from "../helpers/time.js";
import { waitUntil } from "../helpers/wait.js";

// One test per setting: each proves what the setting does, not only that it parses.

const SELLER_KEY = "seller-a-0123456789abcdef";

/** The folders {@link tempFile} made, removed after the suite. */
const tempDirs: string[] = [];

async function tempFile(name: string, text: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "x402-config-"));
  tempDirs.push(dir);
  const file = join(dir, name);
  await writeFile(file, text);
  return file;
}

/** Loads a configuration with a relayer key, `env` on top, for an embedded testnet. */
const load = (env: Record<string, string>) => loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, ...env }, { embedded: ["cronos-testnet"] });

describe("configuration: every setting does what it says", () => {
  after(async () => {
    await Promise.all(tempDirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });
  it("refuses an unknown variable in the facilitator's namespaces, naming the closest known one", () => {
    const cases: Array<[string, string]> = [
      ["CRONOS_MAINNET_RPC", "CRONOS_MAINNET_RPC_URL"],
      ["CRONOS_TESTNET_RPC_ULR", "CRONOS_TESTNET_RPC_URL"],
      ["RELAYER_PRIVATE_KEY_FIL", "RELAYER_PRIVATE_KEY_FILE"],
      ["RATE_LIMIT_SETTLE_PER_MIN", "RATE_LIMIT_SETTLE_PER_MINUTE"],
      ["METRICS_PROT", "METRICS_PORT"],
      ["API_KEYS_PATH", "API_KEYS_FILE"],
    ];
    for (const [typo, known] of cases) {
      expect(() => load({ [typo]: "x" }), typo).to.throw(ConfigError, `${typo}: unknown variable; did you mean ${known}?`);
    }
    // Other variables are none of its business.
    expect(() => load({ HOME: "/root", FORK_TESTNET_URL: "http://x", NODE_OPTIONS: "" })).not.to.throw();
  });

  it("refuses a variable that looks like one of its own (a typo, LEDGER_*, DASHBOARD*, DATABASE_* without DATABASE_URL) and names the likely one", () => {
    const cases: Array<[string, string]> = [
      ["DATABSE_URL", "DATABASE_URL"],
      ["DATABASE_URI", "DATABASE_URL"],
      ["database_url", "DATABASE_URL"],
      ["DATABASE_HOST", "DATABASE_URL"],
      ["LEDGER_PATH", "LEDGER_FILE"],
      ["DASHBORD", "DASHBOARD"],
      ["DASHBOARD_ENABLED", "DASHBOARD"],
      ["LOGLEVEL", "LOG_LEVEL"],
      ["MAX_CONNECTION", "MAX_CONNECTIONS"],
      ["FACILITATOR_NETWORK", "FACILITATOR_NETWORKS"],
      ["CONFIRMATION", "CONFIRMATIONS"],
      ["PROT", "PORT"],
      ["HOTS", "HOST"],
    ];
    for (const [typo, known] of cases) {
      expect(() => load({ [typo]: "x" }), typo).to.throw(
        ConfigError,
        `${typo}: unknown variable; did you mean ${known}? (the facilitator stops at a variable that looks like one of its own; if ${typo} is meant for something else, name it in UNCHECKED_VARIABLES)`,
      );
    }
    // A platform's variables are not typos: npm's own, a scheduler's PORT0/PORTS, Kubernetes' service links,
    // and other DATABASE_* once DATABASE_URL is set (the instance is on the shared database then).
    const platform = {
      npm_config_cache: "/x",
      npm_package_version: "0.1.0",
      PORT0: "31000",
      PORTS: "31000,31001",
      HOSTNAME: "web-1",
      PGHOST: "db",
      DATABASE_SERVICE_HOST: "10.0.0.5",
      DATABASE_SERVICE_PORT: "5432",
      DATABASE_PORT: "tcp://10.0.0.5:5432",
      DATABASE_PORT_5432_TCP_ADDR: "10.0.0.5",
    };
    expect(() => load(platform)).not.to.throw();
    expect(load({ DATABASE_URL: "postgres://u:p@db/x", DATABASE_PUBLIC_URL: "postgres://u:p@public/x", DATABASE_PASSWORD: "p" }).ledger.databaseUrl).to.equal("postgres://u:p@db/x");
    // UNCHECKED_VARIABLES lets another program's variable through, and only that one.
    expect(() => load({ DATABASE_HOST: "db", UNCHECKED_VARIABLES: "DATABASE_HOST, OTHER" })).not.to.throw();
    expect(() => load({ DATABASE_HOST: "db", LOGLEVEL: "x", UNCHECKED_VARIABLES: "DATABASE_HOST" })).to.throw(ConfigError, "LOGLEVEL: unknown variable; did you mean LOG_LEVEL?");
  });

  it("refuses a variable that names one of its own in other words (a synonym, a plural, another unit, the name cut short) and names the intended one", () => {
    const SHARED = { DATABASE_URL: "postgres://u:p@db/x" };
    const cases: Array<[Record<string, string>, string, string]> = [
      // A database URL under another tool's name, or none, while DATABASE_URL is unset: the instance would go embedded.
      [{ POSTGRES_URL: "postgres://u:p@db/x" }, "POSTGRES_URL", "DATABASE_URL"],
      [{ PG_URL: "postgres://u:p@db/x" }, "PG_URL", "DATABASE_URL"],
      [{ DB_URL: "postgres://u:p@db/x" }, "DB_URL", "DATABASE_URL"],
      [{ POSTGRESQL_CONNECTION_STRING: "postgres://u:p@db/x" }, "POSTGRESQL_CONNECTION_STRING", "DATABASE_URL"],
      [{ DATABASE: "postgres://u:p@db/x" }, "DATABASE", "DATABASE_URL"],
      [{ DB: "postgres://u:p@db/x" }, "DB", "DATABASE_URL"],
      [{ LEDGER_URL: "postgres://u:p@db/x" }, "LEDGER_URL", "DATABASE_URL"],
      // A setting that would be dropped without a word.
      [{ MAX_FEE_PER_GAS: "5000" }, "MAX_FEE_PER_GAS", "MAX_FEE_PER_GAS_GWEI"],
      [{ MAX_FEE_PER_GAS_WEI: "5000000000000" }, "MAX_FEE_PER_GAS_WEI", "MAX_FEE_PER_GAS_GWEI"],
      [{ MAX_GAS_PRICE_GWEI: "5000" }, "MAX_GAS_PRICE_GWEI", "MAX_FEE_PER_GAS_GWEI"],
      [{ TRUST_PROXIES: "10.0.0.0/8" }, "TRUST_PROXIES", "TRUST_PROXY"],
      [{ TRUSTED_PROXIES: "10.0.0.0/8" }, "TRUSTED_PROXIES", "TRUST_PROXY"],
      [{ REVERT_PENALTY: "60" }, "REVERT_PENALTY", "REVERT_PENALTY_SECONDS"],
      [{ REVERT_PENALTY_MS: "60000" }, "REVERT_PENALTY_MS", "REVERT_PENALTY_SECONDS"],
      [{ BODY_LIMIT: "1024" }, "BODY_LIMIT", "BODY_LIMIT_BYTES"],
      [{ REQUEST_TIMEOUT: "5000" }, "REQUEST_TIMEOUT", "REQUEST_TIMEOUT_MS"],
      [{ ...SHARED, DATABASE_POOL_SIZE: "20" }, "DATABASE_POOL_SIZE", "LEDGER_POOL_SIZE"],
      [{ ...SHARED, PG_POOL_SIZE: "20" }, "PG_POOL_SIZE", "LEDGER_POOL_SIZE"],
      [{ ...SHARED, POOL_SIZE: "20" }, "POOL_SIZE", "LEDGER_POOL_SIZE"],
      [{ SQLITE_PATH: "/data/ledger.db" }, "SQLITE_PATH", "LEDGER_FILE"],
    ];
    for (const [env, typo, known] of cases) {
      expect(() => load(env), typo).to.throw(
        ConfigError,
        `${typo}: unknown variable; did you mean ${known}? (the facilitator stops at a variable that looks like one of its own; if ${typo} is meant for something else, name it in UNCHECKED_VARIABLES)`,
      );
    }
    // Another program's: with DATABASE_URL set the instance is on its shared database (platforms set these beside
    // it); a name whose meaning is one of ours that is set; the PostgreSQL image's and other tools' own variables.
    expect(
      load({
        ...SHARED,
        POSTGRES_URL: "postgres://u:p@pooler/x",
        POSTGRES_PRISMA_URL: "postgres://u:p@pooler/x",
        POSTGRES_URL_NON_POOLING: "postgres://u:p@db/x",
        DATABASE_URL_UNPOOLED: "postgres://u:p@db/x",
        HEROKU_POSTGRESQL_RED_URL: "postgres://u:p@db/x",
        LEDGER_POOL_SIZE: "4",
        DATABASE_POOL_SIZE: "20",
      }).ledger,
    ).to.deep.include({ databaseUrl: "postgres://u:p@db/x", poolSize: 4 });
    expect(() =>
      load({
        POSTGRES_USER: "u",
        POSTGRES_PASSWORD: "p",
        POSTGRES_DB: "x",
        PGDATABASE: "x",
        OTEL_LOG_LEVEL: "info",
        UV_THREADPOOL_SIZE: "8",
        REDIS_URL: "redis://r",
        SENTRY_DSN: "https://s",
        NODE_ENV: "production",
        PATH: "/usr/bin",
      }),
    ).not.to.throw();
  });

  it("refuses DATABASE_URL set but empty: it would start the instance on its own embedded ledger", () => {
    for (const empty of ["", "  "]) {
      expect(() => load({ DATABASE_URL: empty })).to.throw(
        ConfigError,
        "DATABASE_URL: set, but empty; the instance would start on its own embedded ledger, apart from any instances sharing a database (give the PostgreSQL URL, or unset it to use the embedded ledger on purpose)",
      );
    }
    expect(load({}).ledger.databaseUrl).to.equal(undefined);
  });

  it("takes Kubernetes' service links for no typo, whatever the Service's name, and reads no setting from them (METRICS_PORT=tcp://… for a Service named metrics)", () => {
    const links = (service: string, ip: string, port: number): Record<string, string> => ({
      [`${service}_SERVICE_HOST`]: ip,
      [`${service}_SERVICE_PORT`]: String(port),
      [`${service}_SERVICE_PORT_HTTP`]: String(port),
      [`${service}_PORT`]: `tcp://${ip}:${port}`,
      [`${service}_PORT_${port}_TCP`]: `tcp://${ip}:${port}`,
      [`${service}_PORT_${port}_TCP_PROTO`]: "tcp",
      [`${service}_PORT_${port}_TCP_PORT`]: String(port),
      [`${service}_PORT_${port}_TCP_ADDR`]: ip,
    });
    const env = {
      ...links("DASHBOARD", "10.96.0.10", 80),
      ...links("RELAYER", "10.96.0.11", 8402),
      ...links("LEDGER", "10.96.0.12", 5432),
      ...links("DATABASE", "10.96.0.13", 5432),
      ...links("METRICS", "10.96.0.14", 9464),
      ...links("CRONOS_TESTNET", "10.96.0.15", 8545),
      ...links("RATE_LIMIT", "10.96.0.16", 6379),
      ...links("MAX_FEE", "10.96.0.17", 80),
    };
    const config = load(env);
    expect(config.metricsPort).to.equal(9464);
    expect(config.ledger.databaseUrl).to.equal(undefined);
    expect(load({ ...env, METRICS_PORT: "9100" }).metricsPort).to.equal(9100);
    // Only the shape Kubernetes gives them: a port number under such a name is still a typo of ours.
    expect(() => load({ DASHBOARD_PORT: "8080" })).to.throw(ConfigError, "DASHBOARD_PORT: unknown variable; did you mean DASHBOARD?");
    expect(() => load({ METRICS_PORT: "tcp://10.96.0.14" })).to.throw(ConfigError, 'METRICS_PORT: must be an integer from 0 to 65535, got "tcp://10.96.0.14"');
  });

  it("reads the state index's settings: on by default, STATE_INDEX=false, the log range, the memory bound, per-network start blocks; refuses bad values and typos", () => {
    expect(load({}).stateIndex).to.deep.equal({ enabled: true, logRangeBlocks: 2_000, maxNonces: 500_000, startBlocks: {} });
    expect(load({ STATE_INDEX: "false", STATE_INDEX_LOG_RANGE: "500", STATE_INDEX_MAX_NONCES: "20000", CRONOS_TESTNET_INDEX_START_BLOCK: "10191251" }).stateIndex).to.deep.equal({
      enabled: false,
      logRangeBlocks: 500,
      maxNonces: 20_000,
      startBlocks: { "cronos-testnet": 10_191_251n },
    });
    // A start block for a network not served is not kept.
    expect(load({ CRONOS_MAINNET_INDEX_START_BLOCK: "5" }).stateIndex.startBlocks).to.deep.equal({});
    expect(() => load({ STATE_INDEX: "off" })).to.throw(ConfigError, 'STATE_INDEX: must be "true" or "false"');
    expect(() => load({ STATE_INDEX_LOG_RANGE: "0" })).to.throw(ConfigError, 'STATE_INDEX_LOG_RANGE: must be an integer from 1 to 1000000, got "0"');
    expect(() => load({ STATE_INDEX_MAX_NONCES: "999" })).to.throw(ConfigError, 'STATE_INDEX_MAX_NONCES: must be an integer from 1000 to 1000000000, got "999"');
    expect(() => load({ STATE_INDEX_MAX_NONCES: "lots" })).to.throw(ConfigError, 'STATE_INDEX_MAX_NONCES: must be an integer from 1000 to 1000000000, got "lots"');
    expect(() => load({ CRONOS_TESTNET_INDEX_START_BLOCK: "-1" })).to.throw(ConfigError, 'CRONOS_TESTNET_INDEX_START_BLOCK: must be an integer >= 0, got "-1"');
    expect(() => load({ STATE_INDX: "false" })).to.throw(ConfigError, "STATE_INDX: unknown variable; did you mean STATE_INDEX?");
  });

  it("METRICS_VERIFY_STAGES: off by default (nothing timed, no stage gauges); true times verify's stages onto /metrics; refuses other values", async () => {
    expect(load({}).metricsVerifyStages).to.equal(false);
    expect(load({ METRICS_VERIFY_STAGES: "true" }).metricsVerifyStages).to.equal(true);
    expect(() => load({ METRICS_VERIFY_STAGES: "yes" })).to.throw(ConfigError, 'METRICS_VERIFY_STAGES: must be "true" or "false"');
    expect(() => load({ METRICS_VERIFY_STAGE: "true" })).to.throw(ConfigError, "METRICS_VERIFY_STAGE: unknown variable; did you mean METRICS_VERIFY_STAGES?");

    const off = await openFacilitator("cronos-testnet");
    const offPayment = await makePayment(off.chain);
    expect((await request(off.app).post("/v2/x402/verify").send(offPayment.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
    const offPage = await off.facilitator.metrics.registry.metrics();
    expect(offPage).to.not.include("x402_verify_stage");
    expect(offPage).to.not.include("nodejs_eventloop_lag");
    await off.facilitator.close();

    const on = await openFacilitator("cronos-testnet", { METRICS_VERIFY_STAGES: "true" });
    await on.facilitator.metrics.registry.metrics(); // starts the window
    for (let i = 0; i < 3; i++) {
      const payment = await makePayment(on.chain);
      expect((await request(on.app).post("/v2/x402/verify").send(payment.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
    }
    // A refused verify is answered, and counted, too.
    const refused = await makePayment(on.chain, { signature: `0x${"11".repeat(65)}` });
    expect((await request(on.app).post("/v2/x402/verify").send(refused.body)).body.isValid).to.equal(false);
    const page = await on.facilitator.metrics.registry.metrics();
    const value = (series: string) => Number(page.match(new RegExp(`^${series.replace(/[{}"]/g, "\\$&")} (\\S+)$`, "m"))?.[1]);
    expect(value('x402_verify_stage_verifies{kind="answered"}')).to.equal(4);
    for (const stage of ["edge", "bodyParse", "schema", "headerDecode", "typedDataHash", "recovery", "answer", "write", "metrics"]) {
      expect(value(`x402_verify_stage_microseconds{stage="${stage}"}`), stage).to.be.greaterThan(0);
    }
    expect(value('x402_verify_stage_microseconds{stage="rateLimit"}')).to.equal(0);
    expect(value("x402_main_thread_cpu_microseconds")).to.be.greaterThan(0);
    expect(page).to.include("nodejs_eventloop_lag_p99_seconds");
    // Each scrape starts a new window.
    expect(await on.facilitator.metrics.registry.metrics()).to.match(/^x402_verify_stage_verifies\{kind="answered"\} 0$/m);
    await on.facilitator.close();
  });

  it("reads the catalog's bounds and the ledger's retention: defaults, values, refusals and typos", () => {
    expect([load({}).catalog, load({}).ledger.retentionDays]).to.deep.equal([{ maxEntries: 100_000, maxEntriesPerSeller: 1_000 }, 0]);
    const set = load({ CATALOG_MAX_ENTRIES: "500", CATALOG_MAX_ENTRIES_PER_SELLER: "500", LEDGER_RETENTION_DAYS: "90" });
    expect([set.catalog, set.ledger.retentionDays]).to.deep.equal([{ maxEntries: 500, maxEntriesPerSeller: 500 }, 90]);
    expect(() => load({ CATALOG_MAX_ENTRIES: "0" })).to.throw(ConfigError, 'CATALOG_MAX_ENTRIES: must be an integer from 1 to 10000000, got "0"');
    expect(() => load({ CATALOG_MAX_ENTRIES_PER_SELLER: "many" })).to.throw(ConfigError, 'CATALOG_MAX_ENTRIES_PER_SELLER: must be an integer >= 1, got "many"');
    // One seller's bound above the whole catalog's would never bind.
    expect(() => load({ CATALOG_MAX_ENTRIES: "100", CATALOG_MAX_ENTRIES_PER_SELLER: "101" })).to.throw(
      ConfigError,
      'CATALOG_MAX_ENTRIES_PER_SELLER: must be at most CATALOG_MAX_ENTRIES (100), got "101"',
    );
    expect(() => load({ LEDGER_RETENTION_DAYS: "-1" })).to.throw(ConfigError, 'LEDGER_RETENTION_DAYS: must be an integer from 0 to 36500, got "-1"');
    expect(() => load({ CATALOG_MAX_ENTRYS: "5" })).to.throw(ConfigError, "CATALOG_MAX_ENTRYS: unknown variable; did you mean CATALOG_MAX_ENTRIES?");
  });

  it("reads CHAIN_HISTORY_CONFIRM_MS: 2 s by default, 0 (asked again at once) to 10 minutes, anything else refused naming it", () => {
    expect([load({}).chainHistoryConfirmMs, load({ CHAIN_HISTORY_CONFIRM_MS: "0" }).chainHistoryConfirmMs, load({ CHAIN_HISTORY_CONFIRM_MS: "30000" }).chainHistoryConfirmMs]).to.deep.equal([2_000, 0, 30_000]);
    expect(() => load({ CHAIN_HISTORY_CONFIRM_MS: "-1" })).to.throw(ConfigError, 'CHAIN_HISTORY_CONFIRM_MS: must be an integer from 0 to 600000, got "-1"');
    expect(() => load({ CHAIN_HISTORY_CONFIRM_MS: "soon" })).to.throw(ConfigError, 'CHAIN_HISTORY_CONFIRM_MS: must be an integer from 0 to 600000, got "soon"');
  });

  it("reads RECOVERY_WORKERS and RECOVERY_LATE_MS: one worker per core but one and 10 ms by default, 0 workers, 1 to 1000 ms, anything else refused naming it", () => {
    expect([load({}).recoveryWorkers, load({}).recoveryLateMs]).to.deep.equal([undefined, 10]);
    expect([load({ RECOVERY_WORKERS: "0" }).recoveryWorkers, load({ RECOVERY_LATE_MS: "1000" }).recoveryLateMs]).to.deep.equal([0, 1_000]);
    expect(() => load({ RECOVERY_LATE_MS: "0" })).to.throw(ConfigError, 'RECOVERY_LATE_MS: must be an integer from 1 to 1000, got "0"');
    expect(() => load({ RECOVERY_LATE_MS: "1001" })).to.throw(ConfigError, 'RECOVERY_LATE_MS: must be an integer from 1 to 1000, got "1001"');
    expect(() => load({ RECOVERY_WORKERS: "-1" })).to.throw(ConfigError, 'RECOVERY_WORKERS: must be an integer from 0 to 256, got "-1"');
  });

  it("documents every setting in .env.example, and nothing it does not read", () => {
    const text = readFileSync(new URL("../../.env.example", import.meta.url), "utf8");
    const named = new Set([...text.matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]!));
    expect([...named].filter((name) => !CONFIG_VARIABLES.includes(name))).to.deep.equal([]);
    expect(CONFIG_VARIABLES.filter((name) => !named.has(name))).to.deep.equal([]);
  });

  it("RELAYER_PRIVATE_KEY_FILE: one key per line, each key sends settlements in turn", async () => {
    const file = await tempFile("keys", `${HARDHAT_KEYS.relayer}\r\n${HARDHAT_KEYS.secondRelayer.slice(2)}\n\n`);
    const opened = await openFacilitator("cronos-testnet", { RELAYER_PRIVATE_KEY: "", RELAYER_PRIVATE_KEY_FILE: file });
    const payments = await Promise.all(Array.from({ length: 6 }, () => makePayment(opened.chain)));
    const answers = await Promise.all(payments.map((p) => request(opened.app).post("/v2/x402/settle").send(p.body)));
    expect(answers.map((a) => a.body.event)).to.deep.equal(Array(6).fill("payment.settled"));
    const senders = await Promise.all(answers.map(async (a) => (await opened.chain.publicClient.getTransaction({ hash: a.body.txHash })).from.toLowerCase()));
    expect(new Set(senders)).to.deep.equal(new Set([privateKeyToAccount(HARDHAT_KEYS.relayer).address.toLowerCase(), privateKeyToAccount(HARDHAT_KEYS.secondRelayer).address.toLowerCase()]));
    expect(() => load({ RELAYER_PRIVATE_KEY: "", RELAYER_PRIVATE_KEY_FILE: "/nonexistent/relayer-key" })).to.throw(
      ConfigError,
      "RELAYER_PRIVATE_KEY_FILE: cannot read /nonexistent/relayer-key (ENOENT)",
    );
  });

  it("HEALTH_MAX_BLOCK_AGE_SECONDS: the healthcheck fails once the latest block is older, and 0 never judges age", async () => {
    let nowMs = 0;
    const strict = await openFacilitator("cronos-testnet", { HEALTH_MAX_BLOCK_AGE_SECONDS: "60" }, { now: () => nowMs });
    const latest = await strict.chain.publicClient.getBlock();
    nowMs = Number(latest.timestamp + 30n) * 1000;
    const fresh = await request(strict.app).get("/healthcheck");
    expect([fresh.status, fresh.body.results.networks["cronos-testnet"].blockAgeSeconds]).to.deep.equal([200, 30]);
    nowMs = Number(latest.timestamp + 120n) * 1000;
    const stale = await request(strict.app).get("/healthcheck");
    expect(stale.status).to.equal(503);
    expect(stale.body.results.message).to.equal("cronos-testnet: CRONOS_TESTNET_RPC_URL: the latest block is 120 s old (HEALTH_MAX_BLOCK_AGE_SECONDS 60)");
    const lax = await openFacilitator("cronos-testnet", {}, { now: () => nowMs + 86_400_000 });
    expect((await request(lax.app).get("/healthcheck")).status).to.equal(200);
  });

  it("BODY_LIMIT_BYTES: a body of exactly the limit is read, one byte more is 413", async () => {
    const opened = await openFacilitator("cronos-testnet", { BODY_LIMIT_BYTES: "2048" });
    const { body } = await makePayment(opened.chain);
    const sized = (bytes: number) => {
      const base = JSON.stringify({ ...body, paymentRequirements: { ...body.paymentRequirements, description: "" } });
      return JSON.stringify({ ...body, paymentRequirements: { ...body.paymentRequirements, description: "x".repeat(bytes - base.length) } });
    };
    const atLimit = await request(opened.app).post("/v2/x402/verify").set("Content-Type", "application/json").send(sized(2048));
    expect(atLimit.body).to.deep.equal({ isValid: true, invalidReason: null });
    const over = await request(opened.app).post("/v2/x402/verify").set("Content-Type", "application/json").send(sized(2049));
    expect(over.status).to.equal(413);
    expect(over.body).to.deep.equal({ error: "Payload too large: the limit is 2048 bytes" });
    expect(() => load({ BODY_LIMIT_BYTES: "1023" })).to.throw(ConfigError, 'BODY_LIMIT_BYTES: must be an integer >= 1024, got "1023"');
  });

  it("LOG_LOOKBACK_BLOCKS (the state index off): an authorization spent elsewhere is found at the window's far edge, and not one block beyond", async () => {
    const opened = await openFacilitator("cronos-testnet", { LOG_LOOKBACK_BLOCKS: "5", STATE_INDEX: "false" });
    const payment = await makePayment(opened.chain);
    // Submitted by someone else: the settlement ledger does not know it, the token's logs do.
    const { r, s: sig, v } = parseSignature(payment.signature);
    const m = payment.message;
    const spent = await opened.chain.contract.write.transferWithAuthorization([m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, Number(v), r, sig]);
    await opened.chain.networkHelpers.mine(5);
    const atEdge = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(withoutTimestamp(atEdge.body)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: "Authorization already used", txHash: spent });
    await opened.chain.networkHelpers.mine(1);
    const beyond = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(withoutTimestamp(beyond.body)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: "Authorization already used" });
  });

  it("LOG_LOOKBACK_BLOCKS does not bound an authorization spent elsewhere while the state index vouches: the index knows its block", async () => {
    const opened = await openFacilitator("cronos-testnet", { LOG_LOOKBACK_BLOCKS: "5" });
    const index = opened.facilitator.context.networks.get("cronos-testnet")!.index!;
    expect(await waitUntil(async () => index.status().backfill.state === "done", 10_000, 10)).to.equal(true);
    const payment = await makePayment(opened.chain);
    const { r, s: sig, v } = parseSignature(payment.signature);
    const m = payment.message;
    const spent = await opened.chain.contract.write.transferWithAuthorization([m.from, m.to, m.value, m.validAfter, m.validBefore, m.nonce, Number(v), r, sig]);
    // One block at a time (hardhat_mine's blocks beyond a few do not link by parent hash: no index follows them).
    for (let i = 0; i < 20; i++) await opened.chain.networkHelpers.mine();
    const far = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(withoutTimestamp(far.body)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: "Authorization already used", txHash: spent });
  });

  it("LOG_LOOKBACK_BLOCKS does not bound an authorization this facilitator settled: the ledger holds its hash", async () => {
    const opened = await openFacilitator("cronos-testnet", { LOG_LOOKBACK_BLOCKS: "5" });
    const payment = await makePayment(opened.chain);
    const settled = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(settled.body.event).to.equal("payment.settled");
    await opened.chain.networkHelpers.mine(50);
    const again = await request(opened.app).post("/v2/x402/settle").send(payment.body);
    expect(withoutTimestamp(again.body)).to.deep.equal({ x402Version: 1, event: "payment.failed", network: "cronos-testnet", error: "Authorization already used", txHash: settled.body.txHash });
  });

  it("CONFIRMATIONS: with 2, settle answers only after a second block holds the transaction", async () => {
    let blockPolls = 0;
    const { chain, running } = await startFacilitatorOnChain({ CONFIRMATIONS: "2" }, {}, (opened) =>
      custom({
        request: async (args: { method: string; params?: unknown }) => {
          if (args.method === "eth_blockNumber") blockPolls++;
          return opened.connection.provider.request(args as never);
        },
      }),
    );
    try {
      const payment = await makePayment(chain);
      let answered = false;
      const settling = fetch(`${running.url}/v2/x402/settle`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payment.body) }).then(async (r) => {
        answered = true;
        return (await r.json()) as { event: string; blockNumber: number };
      });
      // Automine puts the transaction in a block at once; the facilitator then keeps polling for a second one.
      await waitUntil(() => chain.contract.read.authorizationState([payment.payer.address, payment.message.nonce]), undefined, 10);
      const minedIn = Number(await chain.publicClient.getBlockNumber());
      const polled = blockPolls;
      await waitUntil(() => blockPolls >= polled + 3, undefined, 10);
      expect(answered).to.equal(false);
      await chain.networkHelpers.mine(1);
      const answer = await settling;
      expect([answer.event, answer.blockNumber]).to.deep.equal(["payment.settled", minedIn]);
    } finally {
      await running.close(0);
    }
  });

  it("SETTLE_MARGIN_SECONDS: verify refuses an authorization expiring within the margin of the chain's clock", async () => {
    const wide = await openFacilitator("cronos-testnet", { SETTLE_MARGIN_SECONDS: "30" });
    const now = (await wide.chain.publicClient.getBlock()).timestamp;
    const { body } = await makePayment(wide.chain, { validBefore: now + 20n });
    expect((await request(wide.app).post("/v2/x402/verify").send(body)).body).to.deep.equal({ isValid: false, invalidReason: "Authorization expired" });
    const narrow = await openFacilitator("cronos-testnet", { SETTLE_MARGIN_SECONDS: "10" });
    const later = (await narrow.chain.publicClient.getBlock()).timestamp;
    const inTime = await makePayment(narrow.chain, { validBefore: later + 20n });
    expect((await request(narrow.app).post("/v2/x402/verify").send(inTime.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
  });

  it("rate limits by default: the 11th verify and the 6th settle a minute from one client IP are 429", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "", RATE_LIMIT_SETTLE_PER_MINUTE: "", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "" });
    const { body } = await makePayment(opened.chain);
    const verifies = [];
    for (let i = 0; i < 11; i++) verifies.push((await request(opened.app).post("/v2/x402/verify").send(body)).status);
    expect(verifies).to.deep.equal([...Array(10).fill(200), 429]);
    const settles = [];
    for (let i = 0; i < 6; i++) settles.push((await request(opened.app).post("/v2/x402/settle").send(body)).status);
    expect(settles).to.deep.equal([...Array(5).fill(200), 429]);
  });

  it("rate limits by default with API keys: 600 verifies and 120 settles a minute per key, the 121st settle a minute from one payer is 429", async function () {
    this.timeout(60_000);
    const OTHER_KEY = "seller-b-0123456789abcdef";
    const opened = await openFacilitator("cronos-testnet", { API_KEYS: `${SELLER_KEY},${OTHER_KEY}`, RATE_LIMIT_VERIFY_PER_MINUTE: "", RATE_LIMIT_SETTLE_PER_MINUTE: "", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "" });
    const { body } = await makePayment(opened.chain);
    const post = (route: string, payment: object = body, key = SELLER_KEY) => request(opened.app).post(`/v2/x402/${route}`).set("Authorization", `Bearer ${key}`).send(payment);
    expect((await post("verify")).headers["ratelimit-policy"]).to.match(/^"verify"; q=600; w=60; pk=/);
    // One key: 120 settles a minute (here one payment and its copies).
    const settles = [];
    for (let i = 0; i < 121; i++) settles.push(await post("settle"));
    expect(settles.map((s) => s.status)).to.deep.equal([...Array(120).fill(200), 429]);
    expect(settles[0]!.headers["ratelimit-policy"]).to.match(/^"settle"; q=120; w=60; pk=/);
    // One payer, its own 120 payments a minute through another key (the first one above is the payer's 1st).
    const paid = [];
    for (let i = 0; i < 120; i++) paid.push(await post("settle", (await makePayment(opened.chain)).body, OTHER_KEY));
    expect(paid.slice(0, 119).every((s) => s.body.event === "payment.settled")).to.equal(true);
    expect(paid[119]!.status).to.equal(429);
    expect(paid[119]!.headers["retry-after"]).to.equal(String(paid[119]!.body.retryAfter));
  });

  it("API_KEYS / API_KEYS_FILE: refuses a short, repeated or unreadable key source without echoing a key", async () => {
    expect(() => load({ API_KEYS: "short" })).to.throw(ConfigError, "API_KEYS: key #1: a key is 16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -");
    expect(() => load({ API_KEYS: `${SELLER_KEY}, ${SELLER_KEY}` })).to.throw(ConfigError, "API_KEYS: key #2: repeats the key of key #1");
    expect(() => load({ API_KEYS: `${SELLER_KEY} verify=1` })).to.throw(ConfigError, "API_KEYS: key #1: per-key settings go in API_KEYS_FILE");
    const pasted = await tempFile("keys", `${SELLER_KEY} another-secret-key-0123456789\n`);
    expect(() => load({ API_KEYS_FILE: pasted })).to.throw(ConfigError, "API_KEYS_FILE: line 1: after the key, only verify=N, settle=N and payTo=<address> may follow");
    const badPayTo = await tempFile("keys", `${SELLER_KEY} payTo=0x1234\n`);
    expect(() => load({ API_KEYS_FILE: badPayTo })).to.throw(ConfigError, "API_KEYS_FILE: line 1: after the key, only verify=N, settle=N and payTo=<address> may follow");
    // A seller's own addresses (lower case, each once), beside its limits.
    const sellers = await tempFile("keys", `${SELLER_KEY} settle=5 payTo=0x70997970C51812dc3A010C7d01b50e0d17dc79C8 payTo=0x70997970c51812dc3a010c7d01b50e0d17dc79c8 payTo=0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc\n`);
    expect(load({ API_KEYS_FILE: sellers }).apiKeys.map(({ settlePerMinute, payTo }) => ({ settlePerMinute, payTo }))).to.deep.equal([
      { settlePerMinute: 5, payTo: ["0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "0x9965507d1a55bcc2695c58ba16fb37d819b0a4dc"] },
    ]);
    const empty = await tempFile("keys", "# no keys yet\n\n");
    expect(() => load({ API_KEYS_FILE: empty })).to.throw(ConfigError, `API_KEYS_FILE: no key found in ${empty}`);
    expect(() => load({ API_KEYS_FILE: "/nonexistent/keys" })).to.throw(ConfigError, "API_KEYS_FILE: cannot read /nonexistent/keys (ENOENT)");
    expect(() => load({ API_KEYS: SELLER_KEY, API_KEYS_FILE: pasted })).to.throw(ConfigError, "API_KEYS / API_KEYS_FILE: set one, not both");
    const config = load({ API_KEYS: SELLER_KEY });
    expect(inspect(config, { depth: 10 })).not.to.include(SELLER_KEY);
  });

  it("ALLOWED_HOSTS: off by default (any Host is answered); with names, every route answers only them and the loopback names, on any port, any case (421 JSON otherwise)", async () => {
    const open = await openFacilitator("cronos-testnet", { DASHBOARD: "true" });
    for (const path of ["/v2/x402/supported", "/healthcheck", "/dashboard/api/networks"]) {
      expect((await request(open.app).get(path).set("Host", "evil.attacker.com")).status, path).to.equal(200);
    }

    expect(load({ ALLOWED_HOSTS: " Pay.Example.COM ,10.0.0.5,[::FFFF:10.0.0.6],pay.example.com., xn--bcher-kva.example" }).allowedHosts).to.deep.equal([
      "pay.example.com",
      "10.0.0.5",
      "[::ffff:a00:6]",
      "xn--bcher-kva.example",
    ]);
    const guarded = await openFacilitator("cronos-testnet", { ALLOWED_HOSTS: "pay.example.com", DASHBOARD: "true" });
    const misdirected = { error: "Misdirected Request: this service does not answer to that Host (loopback names and ALLOWED_HOSTS only)" };
    const payment = await makePayment(guarded.chain);
    const routes = [
      () => request(guarded.app).get("/v2/x402/supported"),
      () => request(guarded.app).get("/healthcheck"),
      () => request(guarded.app).get("/dashboard/api/networks"),
      () => request(guarded.app).get("/"),
      () => request(guarded.app).get(`/v2/x402/settlements/0x${"00".repeat(32)}`),
      () => request(guarded.app).get("/no/such/route"),
      () => request(guarded.app).post("/v2/x402/verify").send(payment.body),
      () => request(guarded.app).post("/v2/x402/settle").send(payment.body),
    ];
    for (const host of ["evil.attacker.com", "pay.example.com.evil.attacker.com", "evil.attacker.com:443", "[2001:db8::1]", "example.com"]) {
      for (const route of routes) {
        const answer = await route().set("Host", host);
        expect([answer.status, answer.headers["content-type"], answer.body, answer.headers["x-request-id"] !== undefined], host).to.deep.equal([421, "application/json; charset=utf-8", misdirected, true]);
      }
    }
    // Refused before anything ran: the payment is still unused.
    expect((await request(guarded.app).post("/v2/x402/verify").set("Host", "pay.example.com").send(payment.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
    for (const host of ["pay.example.com", "PAY.EXAMPLE.COM:443", "pay.example.com.", "localhost:8402", "127.0.0.1", "[::1]:1"]) {
      expect((await request(guarded.app).get("/v2/x402/supported").set("Host", host)).status, host).to.equal(200);
    }

    for (const bad of ["https://pay.example.com", "pay.example.com:8443", "pay.example.com:80", "pay.example.com/x", "*.example.com", "*", "a,,b", "user@pay.example.com", "[::1"]) {
      expect(() => load({ ALLOWED_HOSTS: bad }), bad).to.throw(ConfigError, /^ALLOWED_HOSTS: ".*" is not a host name; list the names clients put in the Host header, comma-separated, without scheme, port or path/);
    }
    expect(() => load({ ALLOWED_HOSTS: "pay.example.com:8443" })).to.throw(ConfigError, 'ALLOWED_HOSTS: "pay.example.com:8443" is not a host name');
    expect(load({ ALLOWED_HOSTS: "" }).allowedHosts).to.deep.equal([]);
  });

  it("REQUEST_TIMEOUT_MS / HEADERS_TIMEOUT_MS / MAX_CONNECTIONS / MAX_CONNECTIONS_PER_CLIENT: defaults 30 s, 10 s, 1000 and 100; the headers time-out may not exceed the request time-out", () => {
    expect(load({}).http).to.deep.equal({ requestTimeoutMs: 30_000, headersTimeoutMs: 10_000, maxConnections: 1_000, maxConnectionsPerClient: 100, connectionQueueMs: 5_000 });
    expect(load({ MAX_CONNECTIONS_PER_CLIENT: "0" }).http.maxConnectionsPerClient).to.equal(0);
    // Unset, the per-client cap is a tenth of MAX_CONNECTIONS, at least 1 and at most 100.
    expect(["1", "5", "20", "99", "100", "999", "5000"].map((max) => load({ MAX_CONNECTIONS: max }).http.maxConnectionsPerClient)).to.deep.equal([1, 1, 2, 9, 10, 99, 100]);
    expect(load({ MAX_CONNECTIONS: "100", MAX_CONNECTIONS_PER_CLIENT: "99" }).http.maxConnectionsPerClient).to.equal(99);
    // At or above MAX_CONNECTIONS one client could hold every place: refused, naming both.
    expect(() => load({ MAX_CONNECTIONS: "100", MAX_CONNECTIONS_PER_CLIENT: "500" })).to.throw(
      ConfigError,
      "MAX_CONNECTIONS_PER_CLIENT: 500 is not below MAX_CONNECTIONS 100, so one client could hold every connection; set it lower (unset: 10, a tenth of MAX_CONNECTIONS, at most 100), or 0 for no per-client cap",
    );
    expect(() => load({ MAX_CONNECTIONS_PER_CLIENT: "1000" })).to.throw(ConfigError, "MAX_CONNECTIONS_PER_CLIENT: 1000 is not below MAX_CONNECTIONS 1000");
    expect(() => load({ MAX_CONNECTIONS_PER_CLIENT: "-1" })).to.throw(ConfigError, 'MAX_CONNECTIONS_PER_CLIENT: must be an integer >= 0, got "-1"');
    expect(load({}).rateLimits.publicPerMinute).to.equal(600);
    expect(() => load({ REQUEST_TIMEOUT_MS: "5000", HEADERS_TIMEOUT_MS: "6000" })).to.throw(ConfigError, "HEADERS_TIMEOUT_MS: 6000 is longer than REQUEST_TIMEOUT_MS 5000");
    expect(() => load({ MAX_CONNECTIONS: "0" })).to.throw(ConfigError, 'MAX_CONNECTIONS: must be an integer >= 1, got "0"');
  });
});
