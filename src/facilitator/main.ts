import pino from "pino";
import { redactUrl } from "../chain/rpc-url.js";
import { ConfigError, DEFAULT_LEDGER_FILE, loadConfig } from "./config/index.js";
import { startFacilitator, type RunningFacilitator } from "./start.js";
import { StartupError } from "./startup-error.js";
import { redactingLogger } from "./logger.js";

/** Options of {@link runFacilitatorProcess}. */
export interface RunProcessOptions {
  env?: NodeJS.ProcessEnv;
  /** Grace for settles in flight at SIGTERM. */
  shutdownGraceMs?: number;
}

/**
 * The facilitator as a process against real RPCs: configuration from the environment, start-up
 * checks, JSON logs on stdout, graceful SIGTERM/SIGINT. It never starts local chains: a configuration
 * or start-up problem (no RPC URL, an unreadable key file, an unknown CRONOS_* / RELAYER_* variable, …)
 * is printed as one line on stderr and exits 1.
 */
export async function runFacilitatorProcess(options: RunProcessOptions = {}): Promise<RunningFacilitator> {
  const env = options.env ?? process.env;
  let config;
  try {
    // Standalone, the embedded ledger is a file: a restart remembers every settlement.
    config = loadConfig(env, { defaultLedgerFile: DEFAULT_LEDGER_FILE });
  } catch (error) {
    if (error instanceof ConfigError) fail(`configuration: ${error.message}`);
    throw error;
  }
  // Asynchronous writes to stdout; `exit` below lets the ones in flight land first.
  const destination = pino.destination({ dest: 1, sync: false });
  const logger = redactingLogger(pino({ level: config.logLevel, base: { service: "x402-facilitator" } }, destination));
  const exit = (code: number) => {
    // pino's flush() returns before a write in flight lands, and process.exit() then wrote the next
    // line first ("stopped" before "stopping"): end the stream and exit once it is closed.
    setTimeout(() => process.exit(code), 2_000).unref();
    destination.once("close", () => process.exit(code));
    destination.end();
  };
  let running: RunningFacilitator;
  try {
    running = await startFacilitator(config, { logger, defaultMetrics: true });
  } catch (error) {
    if (error instanceof StartupError) fail(`start-up check failed: ${error.message}`);
    throw error;
  }
  const ledgerHealth = await running.facilitator.coordination.ledger.health();
  logger.info(
    {
      url: running.url,
      metricsUrl: running.metricsUrl,
      networks: config.networks.map((n) => ({ network: n.network, chainId: n.chainId, rpc: n.rpcUrls.map(redactUrl).join(", ") || undefined, token: n.token })),
      relayers: running.relayers,
      apiKeys: config.apiKeys.length,
      // Where the ledger is: here once (its URL without credentials), never in /healthcheck's public view.
      ledger: { backend: ledgerHealth.backend, location: ledgerHealth.location },
    },
    "facilitator listening",
  );
  const grace = options.shutdownGraceMs ?? 30_000;
  let stoppingSince: number | undefined;
  const stop = (signal: string) => {
    if (stoppingSince !== undefined) {
      // Ctrl+C reaches this process more than once (terminal, npm, bootstrap): only a later one forces.
      if (performance.now() - stoppingSince < 2_000) return;
      logger.warn({ signal }, "stopping again: exiting now");
      exit(1);
      return;
    }
    stoppingSince = performance.now();
    logger.info({ signal, graceMs: grace }, "stopping: no new requests, letting settles in flight finish");
    void running.close(grace).then(() => {
      logger.info({}, "stopped");
      exit(0);
    });
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  return running;
}

function fail(line: string): never {
  process.stderr.write(`facilitator: ${line}\n`);
  process.exit(1);
}
