// `cronos-x402 start` (and `npm start` in the clone): the local stack (two Cronos chains + facilitator)
// in this one process. stdout carries only the summary (or, with --json, exactly one JSON line);
// everything else goes to stderr. With --background it runs detached instead (./background.ts).
import { formatUnits } from "viem";
import { redactUrl } from "../chain/rpc-url.js";
import { ConfigError } from "../facilitator/config/index.js";
import { ACCOUNT_INDEX } from "../harness/accounts.js";
import { parseStartArgs, PORT_SETTING, startUsage, UsageError } from "../harness/cli.js";
import { PORT_ROLE_LABEL, PortInUseError } from "../harness/errors.js";
import { givenUrls, lineLogger, redactGivenUrls, stderrSink } from "../harness/log.js";
import { MULTICALL3_ADDRESS } from "../harness/multicall3.js";
import { assertHarnessCanRun, HarnessUnavailableError, nativeBindingFailure } from "../harness/require-hardhat.js";
import type { NodeKind } from "../harness/defaults.js";
import type { LocalStack } from "../harness/stack.js";
import { whenParentExits, whenWrapperShellSignalled } from "../harness/parent.js";
import { DETACHED_VARIABLE, runInBackground, type DetachedReadyLine } from "./background.js";
import { ENV_FILE_NAMES, writeEnvFile } from "./env-file.js";

/** The detached stack's log is a file nobody rotates: it stops growing here. */
const DETACHED_LOG_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Runs the local stack until SIGINT / SIGTERM / SIGHUP (exit 0 once stopped), printing its summary, or
 * with `--json` one JSON line, when ready. Usage errors exit 2, start-up failures 1. With
 * `--background` it returns once the stack, started detached, is ready.
 */
export async function runStart(argv: readonly string[]): Promise<void> {
  // Started by `start --background`: no parent to follow, a log file for stderr, the ready line for that parent.
  const detached = process.env[DETACHED_VARIABLE] === "1";
  delete process.env[DETACHED_VARIABLE];
  const writeStdout = process.stdout.write.bind(process.stdout);
  const sink = stderrSink(undefined, undefined, detached ? DETACHED_LOG_MAX_BYTES : undefined);
  // Whatever a library prints to stdout lands on stderr, so a --json reader sees one line only.
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    sink.write(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
    const callback = rest.find((arg) => typeof arg === "function") as (() => void) | undefined;
    callback?.();
    return true;
  }) as typeof process.stdout.write;

  // A fork URL may carry an RPC provider's API key: the URLs handed in show scheme and host only.
  const secrets = givenUrls(argv, process.env);
  const log = (line: string) => sink.write(`[start] ${redactGivenUrls(line, secrets)}\n`);

  async function fail(message: string, status: number): Promise<never> {
    process.stderr.write(`error: ${redactGivenUrls(message, secrets)}\n`);
    await sink.flush(1_000);
    process.exit(status);
  }

  let command: ReturnType<typeof parseStartArgs>;
  try {
    command = parseStartArgs(argv);
  } catch (error) {
    if (error instanceof UsageError) await fail(error.message, 2);
    throw error;
  }
  if (command.help) {
    writeStdout(`${startUsage()}\n`);
    process.exit(0);
  }
  try {
    // Said before anything starts: no Hardhat stack trace for a missing package or an old Node.
    assertHarnessCanRun();
  } catch (error) {
    if (error instanceof HarnessUnavailableError) await fail(error.message, 1);
    throw error;
  }
  if (command.background) {
    const status = await runInBackground(argv, { json: command.json, envFile: command.envFile, background: command.background }, {
      stdout: (text) => void writeStdout(text),
      stderr: (text) => void process.stderr.write(redactGivenUrls(text, secrets)),
    });
    await sink.flush(1_000);
    process.exit(status);
  }

  let stack: LocalStack | undefined;
  let signalledAt: number | undefined;

  /** A stop request: a signal, or `reason` (the parent process went away), which counts as SIGTERM. */
  function onSignal(signal: NodeJS.Signals, reason: string = signal): void {
    if (signalledAt !== undefined) {
      // Ctrl+C reaches this process several times (terminal, npm, bootstrap, tsx relays): only a later one forces.
      if (Date.now() - signalledAt < 2_000) return;
      log(`${reason} again: exiting now`);
      void sink.flush(200).then(() => process.exit(1));
      return;
    }
    signalledAt = Date.now();
    // Start-up cannot be interrupted half-way; the start-up path stops the stack once it is up.
    log(`${reason}: stopping${stack ? "" : " once start-up finishes"}`);
    if (stack) void stopAndExit(stack);
  }

  async function stopAndExit(running: LocalStack): Promise<never> {
    setTimeout(() => {
      log("stopping took over 15 s: exiting anyway");
      void sink.flush(500).then(() => process.exit(1));
    }, 15_000).unref();
    await running.stop();
    log("stopped");
    await sink.flush(1_000);
    process.exit(0);
  }

  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.on(signal, () => onSignal(signal));
  if (!detached) {
    // A wrapper killed without passing the signal on (npx on SIGTERM) orphans this process: stop as on SIGTERM.
    whenParentExits((parent) => onSignal("SIGTERM", `the parent process (pid ${parent}) exited`));
    // npx's `sh -c` keeps the SIGINT npx passes it: stop as on SIGINT when that shell was signalled.
    whenWrapperShellSignalled((shell) => onSignal("SIGINT", `SIGINT to the shell npx runs this in (pid ${shell}), which does not pass it on`));
  }

  const startedAt = performance.now();
  try {
    // Loaded only now (Hardhat, EDR, express): signal handlers are in place before the slow imports.
    const { startLocalStack } = await import("../harness/stack.js");
    stack = await startLocalStack({
      ...command.stack,
      env: Object.fromEntries(Object.entries(process.env).filter(([name]) => !ENV_FILE_NAMES.includes(name))),
      logger: lineLogger(command.logLevel, { name: "facilitator", write: sink.write }),
      onProgress: log,
    });
  } catch (error) {
    if (error instanceof PortInUseError) {
      const setting = PORT_SETTING[error.role];
      await fail(`port ${error.port} (${PORT_ROLE_LABEL[error.role]}) is already in use on ${error.host}; choose another with ${setting.flag} N or ${setting.env}=N (0 = any free port), or stop what uses it`, 1);
    }
    if (error instanceof ConfigError) await fail(error.message, 2);
    const binding = nativeBindingFailure(error);
    if (binding) await fail(binding.message, 1);
    await fail(`start-up failed: ${firstLine(error)}`, 1);
    throw error;
  }
  if (signalledAt !== undefined) {
    await stopAndExit(stack);
  } else {
    log(`ready in ${((performance.now() - startedAt) / 1000).toFixed(1)} s`);
    const { facilitatorUrl, harnessUrl, relayer, networks, seller } = stack;
    if (command.envFile !== undefined) writeEnvFile(command.envFile, { facilitatorUrl, harnessUrl, seller, networks });
    const text = summary(stack, command.stack.buyerBalance ?? 0n, detached);
    if (detached) {
      const ready: DetachedReadyLine = { line: { facilitatorUrl, harnessUrl, relayer, networks }, summary: text, seller };
      writeStdout(`${JSON.stringify(ready)}\n`);
    } else if (command.json) {
      writeStdout(`${JSON.stringify({ facilitatorUrl, harnessUrl, relayer, networks })}\n`);
    } else {
      writeStdout(text);
    }
    log(detached ? "running in the background; `cronos-x402 stop` (or SIGTERM) stops everything" : "running; Ctrl+C (SIGINT) or SIGTERM stops everything");
  }
}

function describeLimits(limits: { verifyPerMinute: number; settlePerMinute: number }): string {
  const one = (n: number) => (n === 0 ? "no limit" : `${n}/min`);
  return `verify ${one(limits.verifyPerMinute)}, settle ${one(limits.settlePerMinute)} per client IP (--rate-limit-verify / --rate-limit-settle; the production facilitator defaults to 10 and 5)`;
}

function summary(running: LocalStack, buyerBalance: bigint, detached: boolean): string {
  const lines = [
    "",
    "x402 local stack for Cronos (all on 127.0.0.1)",
    "",
    `Facilitator  ${running.facilitatorUrl}   (GET /v2/x402/supported, POST /v2/x402/verify, POST /v2/x402/settle)`,
    ...(running.dashboardUrl ? [`Dashboard    ${running.dashboardUrl}   (open it in a browser: live payments, buyers, a try-it panel; DASHBOARD=false hides it)`] : []),
    `Harness      ${running.harnessUrl}   (every failure on demand: cronos-x402 fault … / time …, or curl; loopback only)`,
    `Relayer      ${running.relayer}   (Hardhat account #${ACCOUNT_INDEX.relayer})`,
    `Seller payTo ${running.seller}   (Hardhat account #${ACCOUNT_INDEX.seller}, a suggested default)`,
    `Rate limits  ${describeLimits(running.facilitator.facilitator.rateLimits)}`,
    ...(running.facilitator.metricsUrl ? [`Metrics      ${running.facilitator.metricsUrl}   (Prometheus; its own loopback listener)`] : []),
  ];
  for (const [network, info] of Object.entries(running.networks)) {
    const forked = running.chains[network as keyof typeof running.chains]?.forkUrl;
    lines.push(
      "",
      `${network}  chain id ${info.chainId}${forked ? `  (fork of ${redactUrl(forked)})` : ""}`,
      `  RPC URL   ${info.rpcUrl}   (WebSocket: ${info.wsUrl})`,
      `  Node      ${describeNode(running.chains[network as keyof typeof running.chains]?.node)}`,
      `  viem      ${info.viemChain}   (import { ${info.viemChain} } from "viem/chains"; Multicall3 at ${MULTICALL3_ADDRESS})`,
      `  USDC.e    ${info.token}   EIP-712 domain: name "${info.domain.name}", version "${info.domain.version}"`,
      `  Buyers    (${forked ? "topped up to " : ""}${formatUnits(buyerBalance, 6)} USDC.e each) - LOCAL-ONLY: Hardhat's PUBLIC test keys, never use them on a real network`,
      ...info.buyers.map((buyer) => `    ${buyer.address}  ${buyer.privateKey}`),
    );
  }
  const stopping = detached ? "`cronos-x402 stop` stops everything." : "Ctrl+C stops everything.";
  lines.push("", `${stopping} \`cronos-x402 start --json\` prints this as one JSON line (\`npm start -- --json\` in the kit's clone); \`--help\` lists the options.`, "");
  return `${lines.join("\n")}\n`;
}

function describeNode(node: NodeKind | undefined): string {
  return node === "ethereum"
    ? "EDR alone: geth's pool (nonce gaps queued; --node cronos answers as the real networks' nodes)"
    : "a Cronos v1.7 node: strict nonces and its refusal texts, its eth_getLogs caps (docs/cronos-node.md; --node ethereum: geth's pool)";
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] ?? message;
}
