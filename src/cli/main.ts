// The `cronos-x402` command: one entry for the local stack, the production facilitator and the
// conformance checks. The kit's own npm scripts call it too (scripts/*.ts), so there is one path.
import { readFileSync } from "node:fs";
import { isBuiltin } from "node:module";

/** The package's version, from its package.json (two folders up from src/cli or dist/cli). */
export function kitVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return manifest.version;
}

/** The process's own output, for the commands that take somewhere to print. */
const STDIO = { stdout: (text: string) => void process.stdout.write(text), stderr: (text: string) => void process.stderr.write(text) };

/** One subcommand: its line in `--help`, and what runs it (given the arguments after its name). */
interface Command {
  /** Its `--help` description: lines of at most ~100 characters. */
  summary: readonly string[];
  run(argv: readonly string[]): Promise<void>;
}

/**
 * Every subcommand, in the order `--help` lists them. A new one is one entry here; each loads its
 * code only when run, so `--help` and `--version` load nothing else.
 */
const COMMANDS: Readonly<Record<string, Command>> = {
  start: {
    summary: [
      "local Cronos chains (338 and 25) with USDC.e at its real address, funded buyers and a",
      "facilitator, all on 127.0.0.1, until Ctrl+C / SIGTERM (--background: returns once ready)",
      "(needs the package hardhat and Node >= 22.13)",
    ],
    async run(argv) {
      const { runStart } = await import("./start.js");
      await runStart(argv);
    },
  },
  stop: {
    summary: ["stops the stack `start --background` started from this folder, and waits until it has gone"],
    async run(argv) {
      const { runStop } = await import("./stop.js");
      const status = await runStop(argv, STDIO);
      process.exitCode = status;
    },
  },
  fault: {
    summary: [
      "makes a failure happen on the local stack (a balance gone, the token paused, the RPC down,",
      "the facilitator busy or stopped, …) and undoes it: `fault --help` (loads no Hardhat)",
    ],
    async run(argv) {
      const { runFault } = await import("./fault.js");
      process.exitCode = await runFault(argv, STDIO);
    },
  },
  time: {
    summary: ["moves the local stack's chain time forward, stops and resumes its blocks: `time --help`"],
    async run(argv) {
      const { runTime } = await import("./fault.js");
      process.exitCode = await runTime(argv, STDIO);
    },
  },
  sign: {
    summary: [
      "prints the X-PAYMENT (Cronos) or PAYMENT-SIGNATURE (x402 v2) value of a payment, from a 402",
      "answer or from flags, signed with --key / BUYER_PRIVATE_KEY: `sign --help`",
    ],
    async run(argv) {
      const { runSign } = await import("./sign.js");
      process.exitCode = await runSign(argv, STDIO);
    },
  },
  pay: {
    summary: ["a paying curl: sends the request, pays its 402 (at most --max-amount), prints the answer and the settlement"],
    async run(argv) {
      const { runPay } = await import("./pay.js");
      process.exitCode = await runPay(argv, STDIO);
    },
  },
  facilitator: {
    summary: [
      "the facilitator alone against the RPCs in the environment (CRONOS_TESTNET_RPC_URL, ...,",
      "RELAYER_PRIVATE_KEY); never starts local chains; JSON logs on stdout",
    ],
    async run(argv) {
      if (argv.includes("--help") || argv.includes("-h")) {
        process.stdout.write(
          "Usage: cronos-x402 facilitator\n\nThe facilitator against real RPCs, configured by environment variables only (see .env.example in the\nkit: CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL, RELAYER_PRIVATE_KEY or RELAYER_PRIVATE_KEY_FILE, ...).\nA configuration or start-up problem is one line on stderr and exit 1. SIGTERM / SIGINT stop it.\n",
        );
        return;
      }
      if (argv.length > 0) return usageError(`facilitator takes no arguments (it reads environment variables), got "${argv[0]}"`);
      if (!embeddedLedgerCanRun()) return failWith("facilitator", embeddedLedgerProblem("facilitator"));
      const { runFacilitatorProcess } = await import("../facilitator/main.js");
      await runFacilitatorProcess();
      await followNpx();
    },
  },
  conformance: {
    summary: ["checks a facilitator (--facilitator URL, or a local stack started for the run) against the spec"],
    async run(argv) {
      const { runConformanceCommand } = await import("../conformance/cli.js");
      const status = await runConformanceCommand(argv, {
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
      });
      // Let the streams drain before leaving: stdout may be a pipe read by CI.
      process.stdout.write("", () => process.exit(status));
    },
  },
  catalog: {
    summary: ["lists the discovery catalog (x402 bazaar), or removes a resource from it (on DATABASE_URL / LEDGER_FILE)"],
    async run(argv) {
      if (!argv.includes("--help") && !argv.includes("-h") && !embeddedLedgerCanRun()) return failWith("catalog", embeddedLedgerProblem("catalog list"));
      const { runCatalog } = await import("./catalog.js");
      process.exitCode = await runCatalog(argv);
    },
  },
};

/** The top-level `--help` text. */
export function cliUsage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((name) => name.length)) + 3;
  return [
    "Usage: cronos-x402 <command> [options]",
    "",
    "The x402 facilitator kit for Cronos.",
    "",
    "Commands:",
    ...Object.entries(COMMANDS).flatMap(([name, command]) => command.summary.map((line, i) => `  ${(i === 0 ? name : "").padEnd(width)}${line}`)),
    "",
    "  cronos-x402 <command> --help   that command's options",
    "  cronos-x402 --version          the kit's version",
  ].join("\n");
}

/**
 * Runs one command of the CLI with `argv` (the arguments after `cronos-x402`). `start` and
 * `facilitator` keep running until a signal stops them; `conformance` exits with its status.
 */
export async function runCli(argv: readonly string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name !== undefined && Object.hasOwn(COMMANDS, name)) return COMMANDS[name]!.run(rest);
  switch (name) {
    case "--version":
    case "-v":
      process.stdout.write(`${kitVersion()}\n`);
      return;
    case undefined:
      // No command is a usage error: the usage on stderr, as for an unknown command (stdout stays for output).
      process.stderr.write(`error: a command is required\n\n${cliUsage()}\n`);
      process.exitCode = 2;
      return;
    case "--help":
    case "-h":
    case "help":
      process.stdout.write(`${cliUsage()}\n`);
      return;
    default:
      return usageError(`unknown command "${name}"`);
  }
}

function usageError(message: string): void {
  process.stderr.write(`error: ${message}\n\n${cliUsage()}\n`);
  process.exitCode = 2;
}

function failWith(command: string, message: string): void {
  process.stderr.write(`${command}: ${message}\n`);
  process.exitCode = 1;
}

/** node:sqlite, the embedded ledger's engine, is built in (unflagged) from Node 22.13. */
function nodeHasSqlite(): boolean {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  return (major > 22 || (major === 22 && minor >= 13)) && isBuiltin("node:sqlite");
}

/** Whether the ledger this command would open can be opened here: PostgreSQL (DATABASE_URL) always, the embedded one with node:sqlite. */
function embeddedLedgerCanRun(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.DATABASE_URL?.trim()) || nodeHasSqlite();
}

/** What to do on a Node without node:sqlite; `cliCommand` is the command to re-run on Node 22. */
export function embeddedLedgerProblem(cliCommand: string): string {
  return `the embedded ledger (LEDGER_FILE, used without DATABASE_URL) needs node:sqlite, built into Node >= 22.13; this is Node ${process.versions.node}. Run it on Node 22 or later (e.g. npx -y -p node@22 -c "cronos-x402 ${cliCommand}"), or set DATABASE_URL=postgres://… to keep the ledger in PostgreSQL`;
}

/**
 * Under npx (npm_command=exec) a long-running command sits below `npm exec` and its `sh -c`, which keep
 * the SIGINT they are sent (and npx ends on SIGTERM without passing it on): the signal is re-raised
 * here, so the command's own SIGINT / SIGTERM handling stops it. `start` watches the same way itself.
 */
async function followNpx(): Promise<void> {
  if (process.env.npm_command !== "exec") return;
  const { whenParentExits, whenWrapperShellSignalled } = await import("../harness/parent.js");
  whenParentExits(() => process.kill(process.pid, "SIGTERM"));
  whenWrapperShellSignalled(() => process.kill(process.pid, "SIGINT"));
}

/** An error as one line: its message's first line, without Node's `ERR_…` code or a stack trace. */
function oneLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] || (error instanceof Error ? error.name : "unknown error");
}

/**
 * The process entry of `cronos-x402` (and the clone's npm scripts): runs {@link runCli}; an error
 * nothing else handled, at start-up or later, is one line on stderr (naming the command) and exit 1.
 */
export async function runCliProcess(argv: readonly string[]): Promise<void> {
  const unexpected = (error: unknown) => {
    process.stderr.write(`error: cronos-x402 ${argv[0] ?? ""} stopped on an unexpected error: ${oneLine(error)}\n`);
    process.exit(1);
  };
  process.on("uncaughtException", unexpected);
  process.on("unhandledRejection", unexpected);
  await runCli(argv).catch(unexpected);
}
