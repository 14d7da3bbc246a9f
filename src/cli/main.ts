// The `cronos-x402` command: one entry for the local stack, the production facilitator and the
// conformance checks. The kit's own npm scripts call it too (scripts/*.ts), so there is one path.
import { readFileSync } from "node:fs";

/** The package's version, from its package.json (two folders up from src/cli or dist/cli). */
export function kitVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
  return manifest.version;
}

/** The top-level `--help` text. */
export function cliUsage(): string {
  return [
    "Usage: cronos-x402 <command> [options]",
    "",
    "The x402 facilitator kit for Cronos.",
    "",
    "Commands:",
    "  start         local Cronos chains (338 and 25) with USDC.e at its real address, funded buyers and a",
    "                facilitator, all on 127.0.0.1, until Ctrl+C / SIGTERM (needs the package hardhat and Node >= 22.13)",
    "  facilitator   the facilitator alone against the RPCs in the environment (CRONOS_TESTNET_RPC_URL, ...,",
    "                RELAYER_PRIVATE_KEY); never starts local chains; JSON logs on stdout",
    "  conformance   checks a facilitator (--facilitator URL, or a local stack started for the run) against the spec",
    "  catalog       lists the discovery catalog (x402 bazaar), or removes a resource from it (on DATABASE_URL / LEDGER_FILE)",
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
  const [command, ...rest] = argv;
  switch (command) {
    case "start": {
      const { runStart } = await import("./start.js");
      await runStart(rest);
      return;
    }
    case "facilitator": {
      if (rest.includes("--help") || rest.includes("-h")) {
        process.stdout.write(
          "Usage: cronos-x402 facilitator\n\nThe facilitator against real RPCs, configured by environment variables only (see .env.example in the\nkit: CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL, RELAYER_PRIVATE_KEY or RELAYER_PRIVATE_KEY_FILE, ...).\nA configuration or start-up problem is one line on stderr and exit 1. SIGTERM / SIGINT stop it.\n",
        );
        return;
      }
      if (rest.length > 0) return usageError(`facilitator takes no arguments (it reads environment variables), got "${rest[0]}"`);
      const { runFacilitatorProcess } = await import("../facilitator/main.js");
      await runFacilitatorProcess();
      return;
    }
    case "conformance": {
      const { runConformanceCommand } = await import("../conformance/cli.js");
      const status = await runConformanceCommand(rest, {
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
      });
      // Let the streams drain before leaving: stdout may be a pipe read by CI.
      process.stdout.write("", () => process.exit(status));
      return;
    }
    case "catalog": {
      const { runCatalog } = await import("./catalog.js");
      process.exitCode = await runCatalog(rest);
      return;
    }
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
      return usageError(`unknown command "${command}"`);
  }
}

function usageError(message: string): void {
  process.stderr.write(`error: ${message}\n\n${cliUsage()}\n`);
  process.exitCode = 2;
}
