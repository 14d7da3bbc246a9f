import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { privateKeyToAccount } from "viem/accounts";
import type { Address, Hex } from "viem";
import { whenParentExits } from "../harness/parent.js";
import { assertHarnessCanRun, HarnessUnavailableError } from "../harness/require-hardhat.js";
import { addressSchema } from "../protocol/schemas.js";
import { NETWORK_NAMES, type NetworkName } from "../protocol/networks.js";
import { createChainReader, redactUrl } from "./chain.js";
import { formatResultLine, formatSummary, nameWidth } from "./report/console.js";
import { toJsonDocument } from "./report/json.js";
import { toJUnit } from "./report/junit.js";
import { runConformance } from "./run.js";
import { networkOf, resultName } from "./runner.js";
import { createTargets, parseNetwork, TargetError, type Target, type TargetOptions } from "./target.js";
import type { Check, Dialect } from "./check.js";
import { KitErrorOf } from "../protocol/errors.js";

/** A bad flag or setting; the message is one line naming it (never a key). Exit status 2. */
export class UsageError extends KitErrorOf("UsageError", "usage") {}

/** What `npm run conformance` was asked to do. */
export interface ConformanceCommand {
  help: boolean;
  /** The facilitator's base URL; absent: start the local stack and check it. */
  facilitator?: string;
  network?: NetworkName;
  /** The dialects to check; default those the facilitator offers. */
  dialects?: Dialect[];
  rpc?: string;
  /** The buyer's key. Held only to sign; never printed. */
  buyerKey?: Hex;
  payTo?: Address;
  /** A seller API key for verify and settle. Never printed. */
  apiKey?: string;
  settle: boolean;
  rateLimit: boolean;
  junit?: string;
  json: boolean;
  only: string[];
}

/** Requests per minute of the local stack's limits during a local run: far above what the other checks use, low enough to spend in a second. */
export const LOCAL_RATE_LIMIT = 500;

/** The `--help` text. */
export function conformanceUsage(): string {
  return [
    "Usage: cronos-x402 conformance [options]        (in the kit's clone: npm run conformance -- [options])",
    "",
    "Checks a facilitator against the x402 facilitator spec for Cronos and the project's decisions: every",
    "check prints one line (PASS, FAIL with what was expected and what came back, SKIP and why) and the spec",
    "row it proves, then a summary. Exit status 0 only when every check run passed; 1 when one failed; 2 on",
    "a bad option.",
    "",
    "Without --facilitator it starts the local stack (both chains, a facilitator, funded buyers; ports chosen",
    "freely) and runs every check there, payments and rate limits included. No key is needed.",
    "",
    "Options:",
    "  --facilitator URL     the facilitator's base URL (/healthcheck and /v2/x402/… under it)",
    "  --network NAME        the network to check: cronos-testnet, cronos-mainnet (cronos), eip155:338, eip155:25;",
    "                        default every network the facilitator's supported answer lists",
    "  --dialect NAME        cronos (x402Version 1) or x402-v2; default every dialect supported offers",
    "  --rpc URL             the network's JSON-RPC: the chain's clock, used nonces, the settlement's receipt,",
    "                        events and balances (needs --network)",
    "  --buyer-key-file PATH a file holding the funded buyer's private key (hex); the key is never printed",
    "  --buyer-key 0x…       the same on the command line (visible to other users of the machine; prefer the file)",
    "  --pay-to 0x…          who the checks' payments pay (default: the buyer itself)",
    "  --api-key-file PATH   a file holding a seller API key, for a facilitator that requires one on verify",
    "                        and settle (sent as Authorization: Bearer; never printed)",
    "  --settle              settle real payments: 2 units of 1 (0.000001 USDC.e each), a replay, and",
    "                        three concurrent settles of one authorization (needs a funded buyer key)",
    "  --rate-limit          also spend this IP's verify and settle quota to check the 429 answer",
    "  --only PATTERN        run only the checks whose id (or id@network) matches; * is a wildcard;",
    "                        repeat or separate with commas (e.g. --only 'verify.*,settle.pays')",
    "  --junit FILE          also write the results as JUnit XML (one testcase per check)",
    "  --json                print one JSON document on stdout (the check lines go to stderr)",
    "  --help                this text",
    "",
    "Costs nothing by default: every refusal is provoked without funds, and nothing is settled without --settle.",
  ].join("\n");
}

/** A network as a person may name it (moved to ./target.js, where `createTarget` reads it too). */
export { parseNetwork } from "./target.js";

function parseUrl(flag: string, value: string): string {
  try {
    const url = new URL(value);
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error("not http(s)");
    return value.replace(/\/+$/, "");
  } catch {
    throw new UsageError(`${flag}: expected an http(s) URL, got ${JSON.stringify(redactUrl(value))}`);
  }
}

/** A private key in hex (with or without 0x), or a usage error that does not repeat it. */
function parseKey(source: string, value: string): Hex {
  const text = value.trim();
  if (!/^(0x)?[0-9a-fA-F]{64}$/.test(text)) throw new UsageError(`${source}: not a 32-byte hex private key (its content is not shown)`);
  return (text.startsWith("0x") ? text : `0x${text}`) as Hex;
}

/** A secret file's text, or a usage error naming the file (never its content). */
async function readText(flag: string, path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    throw new UsageError(`${flag}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
  }
}

/** The first line that is neither blank nor a `#` comment, trimmed. */
function firstLine(text: string): string {
  return text.split(/\r?\n/).map((line) => line.trim()).find((line) => line !== "" && !line.startsWith("#")) ?? "";
}

/** Parses the command line (after `--`). Reads the key file when one is named. */
export async function parseConformanceArgs(argv: readonly string[]): Promise<ConformanceCommand> {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        facilitator: { type: "string" },
        network: { type: "string" },
        dialect: { type: "string", multiple: true },
        rpc: { type: "string" },
        "buyer-key": { type: "string" },
        "buyer-key-file": { type: "string" },
        "pay-to": { type: "string" },
        "api-key-file": { type: "string" },
        settle: { type: "boolean", default: false },
        "rate-limit": { type: "boolean", default: false },
        only: { type: "string", multiple: true },
        junit: { type: "string" },
        json: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    }));
  } catch (error) {
    // parseArgs names the option; a value (possibly a key) is never part of its message.
    throw new UsageError(`${(error as Error).message.split("\n")[0]} (see --help)`);
  }
  const command: ConformanceCommand = {
    help: values.help,
    settle: values.settle,
    rateLimit: values["rate-limit"],
    json: values.json,
    only: (values.only ?? []).flatMap((pattern) => pattern.split(",")).map((pattern) => pattern.trim()).filter(Boolean),
  };
  if (values.facilitator !== undefined) command.facilitator = parseUrl("--facilitator", values.facilitator);
  if (values.network !== undefined) {
    const network = parseNetwork(values.network);
    if (!network) throw new UsageError(`--network: unknown network ${JSON.stringify(values.network)}; use cronos-testnet, cronos-mainnet, eip155:338 or eip155:25`);
    command.network = network;
  }
  if (values.dialect !== undefined) {
    const dialects = values.dialect.flatMap((value) => value.split(",")).map((value) => value.trim());
    const unknown = dialects.find((dialect) => dialect !== "cronos" && dialect !== "x402-v2");
    if (unknown !== undefined) throw new UsageError(`--dialect: unknown dialect ${JSON.stringify(unknown)}; use cronos or x402-v2`);
    command.dialects = [...new Set(dialects as Dialect[])];
  }
  if (values.rpc !== undefined) command.rpc = parseUrl("--rpc", values.rpc);
  if (values["buyer-key"] !== undefined && values["buyer-key-file"] !== undefined) throw new UsageError("--buyer-key and --buyer-key-file: give one of them");
  if (values["buyer-key"] !== undefined) command.buyerKey = parseKey("--buyer-key", values["buyer-key"]);
  if (values["buyer-key-file"] !== undefined) {
    const path = values["buyer-key-file"];
    command.buyerKey = parseKey(`--buyer-key-file ${path}`, firstLine(await readText("--buyer-key-file", path)));
  }
  if (values["pay-to"] !== undefined) {
    const payTo = addressSchema.safeParse(values["pay-to"]);
    if (!payTo.success) throw new UsageError(`--pay-to: expected a 0x-prefixed 20-byte address, got ${JSON.stringify(values["pay-to"])}`);
    command.payTo = payTo.data;
  }
  if (values["api-key-file"] !== undefined) {
    const path = values["api-key-file"];
    const line = firstLine(await readText("--api-key-file", path));
    if (!/^[\x21-\x7e]{1,512}$/.test(line)) throw new UsageError(`--api-key-file ${path}: no API key on its first line (printable characters, no spaces; its content is not shown)`);
    command.apiKey = line;
  }
  if (values.junit !== undefined && values.junit.trim() === "") throw new UsageError("--junit: expected a file path");
  if (values.junit !== undefined) command.junit = values.junit;

  if (command.facilitator === undefined) {
    for (const [flag, given] of [["--rpc", command.rpc], ["--buyer-key", command.buyerKey], ["--pay-to", command.payTo], ["--api-key-file", command.apiKey]] as const) {
      if (given !== undefined) throw new UsageError(`${flag}: only with --facilitator (the local stack brings its own chains and buyers)`);
    }
  } else {
    const attached = command.rpc !== undefined || command.buyerKey !== undefined || command.payTo !== undefined || command.settle;
    if (attached && command.network === undefined) {
      throw new UsageError("--network: name the network that --rpc, --buyer-key, --pay-to and --settle are for (e.g. --network cronos-testnet)");
    }
    if (command.settle && command.buyerKey === undefined) throw new UsageError("--settle: needs a funded buyer key (--buyer-key-file PATH)");
  }
  return command;
}

/** Where the command writes. */
export interface ConformanceIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

/** A facilitator to check, its networks, and what to stop afterwards. */
interface Setup {
  facilitatorUrl: string;
  local: boolean;
  targets: Target[];
  settle: boolean;
  rateLimit: boolean;
  stop(): Promise<void>;
}

/** The targets of a run against a facilitator at a URL: `createTargets`, its errors named by the flags. */
async function remoteSetup(command: ConformanceCommand, facilitatorUrl: string, note: (line: string) => void): Promise<Setup> {
  const FLAG: Readonly<Record<keyof TargetOptions, string>> = { network: "--network", rpcUrl: "--rpc", buyerKey: "--buyer-key", payTo: "--pay-to", relayers: "--relayers" };
  let targets: Target[];
  try {
    targets = await createTargets({
      facilitatorUrl,
      onNote: note,
      ...(command.network ? { network: command.network } : {}),
      ...(command.rpc ? { rpcUrl: command.rpc } : {}),
      ...(command.buyerKey ? { buyerKey: command.buyerKey } : {}),
      ...(command.payTo ? { payTo: command.payTo } : {}),
    });
  } catch (error) {
    if (error instanceof TargetError) throw new UsageError(`${FLAG[error.option]} ${error.detail}`);
    throw error;
  }
  return { facilitatorUrl, local: false, targets, settle: command.settle, rateLimit: command.rateLimit, stop: async () => {} };
}

/** The local stack cannot be started (no Hardhat, Node too old, or its start failed): one line, exit 1. */
class LocalStackError extends KitErrorOf("LocalStackError", "local_stack_unavailable") {}

async function localSetup(command: ConformanceCommand, note: (line: string) => void): Promise<Setup> {
  const networks = command.network ? [command.network] : [...NETWORK_NAMES];
  try {
    // Said before anything starts: a missing hardhat or an old Node is a line, not a stack trace.
    assertHarnessCanRun("conformance");
  } catch (error) {
    if (error instanceof HarnessUnavailableError) throw new LocalStackError(`${error.message} (or check a running facilitator: --facilitator URL)`);
    throw error;
  }
  note(`starting the local stack (${networks.join(", ")}) for this run`);
  // Loaded only here: a run against a URL never loads Hardhat.
  const { startLocalStack } = await import("../harness/stack.js");
  const stack = await startLocalStack({
    networks,
    port: 0,
    rpcPorts: Object.fromEntries(networks.map((network) => [network, 0])),
    rateLimits: { verifyPerMinute: LOCAL_RATE_LIMIT, settlePerMinute: LOCAL_RATE_LIMIT },
  }).catch((error: unknown) => {
    const message = error instanceof Error ? error.message : String(error);
    throw new LocalStackError(`the local stack did not start: ${message.split("\n")[0]}`);
  });
  const targets = networks.map((network): Target => {
    const local = stack.networks[network]!;
    return {
      network,
      chainId: local.chainId,
      token: local.token,
      domain: local.domain,
      chain: createChainReader(local.rpcUrl),
      // Hardhat's public test key #2 (LOCAL-ONLY), funded by the stack.
      buyer: privateKeyToAccount(local.buyers[0]!.privateKey),
      payTo: stack.seller,
      relayers: [stack.relayer],
    };
  });
  return { facilitatorUrl: stack.facilitatorUrl, local: true, targets, settle: true, rateLimit: true, stop: () => stack.stop() };
}

function describeTarget(target: Target): string {
  const parts = [`chain ${target.chainId}`, `USDC.e ${target.token}`];
  parts.push(target.chain ? `RPC ${target.chain.label}` : "no RPC");
  parts.push(target.buyer ? `buyer ${target.buyer.address}` : "no buyer key");
  parts.push(`payTo ${target.payTo}`);
  return `${target.network}: ${parts.join(", ")}`;
}

/** Runs the command; resolves with the exit status. */
export async function runConformanceCommand(argv: readonly string[], io: ConformanceIo): Promise<number> {
  const note = (line: string) => io.stderr(`[conformance] ${line}\n`);
  let command: ConformanceCommand;
  try {
    command = await parseConformanceArgs(argv);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`error: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  if (command.help) {
    io.stdout(`${conformanceUsage()}\n`);
    return 0;
  }
  const out = command.json ? io.stderr : io.stdout;

  let setup: Setup;
  try {
    setup = command.facilitator ? await remoteSetup(command, command.facilitator, note) : await localSetup(command, note);
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`error: ${error.message}\n`);
      return 2;
    }
    if (error instanceof LocalStackError) {
      io.stderr(`error: ${error.message}\n`);
      return 1;
    }
    throw error;
  }
  const stopOnSignal = (signal: NodeJS.Signals, reason: string = signal) => {
    note(`${reason}: stopping`);
    void setup.stop().finally(() => process.exit(signal === "SIGINT" ? 130 : 143));
  };
  const onInterrupt = () => stopOnSignal("SIGINT");
  const onTerminate = () => stopOnSignal("SIGTERM");
  process.once("SIGINT", onInterrupt);
  process.once("SIGTERM", onTerminate);
  // Orphaned by a wrapper that a signal ended (npx on SIGTERM): the local stack must not outlive it.
  const unwatch = setup.local ? whenParentExits((parent) => stopOnSignal("SIGTERM", `the parent process (pid ${parent}) exited`)) : () => {};

  try {
    const header = (checks: readonly Check[]) => {
      const width = nameWidth(checks.map((check) => resultName({ id: check.id, network: networkOf(check) })));
      out(`x402 facilitator conformance: ${setup.facilitatorUrl}${setup.local ? " (the local stack, started for this run)" : ""}\n`);
      for (const target of setup.targets) out(`  ${describeTarget(target)}\n`);
      out(`  settle ${setup.settle ? "on" : "off"}, rate limit ${setup.rateLimit ? "on" : "off"}; ${checks.length} checks\n\n`);
      return width;
    };
    let width = 0;
    const { report, dialects } = await runConformance({
      facilitatorUrl: setup.facilitatorUrl,
      targets: setup.targets,
      settle: setup.settle,
      rateLimit: setup.rateLimit,
      only: command.only,
      ...(command.apiKey ? { apiKey: command.apiKey } : {}),
      ...(command.dialects ? { dialects: command.dialects } : {}),
      onStart: (checks) => (width = header(checks)),
      onResult: (result) => out(`${formatResultLine(result, width)}\n`),
      onNote: note,
    });
    if (report.summary.total === 0) {
      io.stderr(`error: --only: no check matches ${command.only.join(", ")}\n`);
      return 2;
    }
    out(`\n${formatSummary(report)}\n`);
    if (command.junit) {
      await writeFile(command.junit, toJUnit(report));
      note(`JUnit XML written to ${command.junit}`);
    }
    if (command.json) {
      const document = toJsonDocument(report, {
        local: setup.local,
        networks: setup.targets.map((target) => target.network),
        dialects,
        permissions: { settle: setup.settle, rateLimit: setup.rateLimit },
      });
      io.stdout(`${JSON.stringify(document)}\n`);
    }
    return report.summary.failed === 0 ? 0 : 1;
  } finally {
    process.off("SIGINT", onInterrupt);
    process.off("SIGTERM", onTerminate);
    unwatch();
    await setup.stop();
  }
}
