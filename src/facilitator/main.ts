import pino from "pino";
import { redactUrl } from "../chain/rpc-url.js";
import { ConfigError, loadConfig } from "./config.js";
import { startFacilitator, StartupError, type RunningFacilitator } from "./server.js";
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
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) fail(`configuration: ${error.message}`);
    throw error;
  }
  const pinoLogger = pino({ level: config.logLevel, base: { service: "x402-facilitator" } });
  const logger = redactingLogger(pinoLogger);
  let running: RunningFacilitator;
  try {
    running = await startFacilitator(config, { logger, defaultMetrics: true });
  } catch (error) {
    if (error instanceof StartupError) fail(`start-up check failed: ${error.message}`);
    throw error;
  }
  logger.info(
    {
      url: running.url,
      metricsUrl: running.metricsUrl,
      networks: config.networks.map((n) => ({ network: n.network, chainId: n.chainId, rpc: n.rpcUrl && redactUrl(n.rpcUrl), token: n.token })),
      relayers: running.relayers,
      apiKeys: config.apiKeys.length,
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
      pinoLogger.flush(() => process.exit(1));
      return;
    }
    stoppingSince = performance.now();
    logger.info({ signal, graceMs: grace }, "stopping: no new requests, letting settles in flight finish");
    void running.close(grace).then(async () => {
      logger.info({}, "stopped");
      // pino writes asynchronously: exiting with a write in flight printed "stopped" before "stopping".
      await new Promise<void>((resolve) => {
        setTimeout(resolve, 2_000).unref();
        pinoLogger.flush(() => resolve());
      });
      process.exit(0);
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
