import pino from "pino";
import { ConfigError, loadConfig } from "./config.js";
import { startFacilitator, StartupError, type RunningFacilitator } from "./server.js";
import type { Logger } from "./logger.js";

/** Options of {@link runFacilitatorProcess}. */
export interface RunProcessOptions {
  env?: NodeJS.ProcessEnv;
  /** Grace for settles in flight at SIGTERM. */
  shutdownGraceMs?: number;
}

/**
 * The facilitator as a process against real RPCs: configuration from the environment, start-up
 * checks, JSON logs on stdout, graceful SIGTERM/SIGINT. A configuration or start-up problem is
 * printed as one line on stderr and exits 1.
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
  const logger = pino({ level: config.logLevel, base: { service: "x402-facilitator" } }) as unknown as Logger;
  let running: RunningFacilitator;
  try {
    running = await startFacilitator(config, { logger, defaultMetrics: true });
  } catch (error) {
    if (error instanceof StartupError) fail(`start-up check failed: ${error.message}`);
    throw error;
  }
  logger.info(
    { url: running.url, networks: config.networks.map((n) => ({ network: n.network, chainId: n.chainId, token: n.token })), relayers: running.relayers },
    "facilitator listening",
  );
  const grace = options.shutdownGraceMs ?? 30_000;
  const stop = (signal: string) => {
    logger.info({ signal, graceMs: grace }, "stopping: no new requests, letting settles in flight finish");
    void running.close(grace).then(() => {
      logger.info({}, "stopped");
      process.exit(0);
    });
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  return running;
}

function fail(line: string): never {
  process.stderr.write(`facilitator: ${line}\n`);
  process.exit(1);
}
