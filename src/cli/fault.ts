// `cronos-x402 fault …` and `cronos-x402 time …`: the local stack's fault and time controls from a shell,
// for a suite in any language. Pure HTTP to the stack's control endpoint (no Hardhat loaded here): found by
// --url, HARNESS_URL, or the state file of `cronos-x402 start --background`.
import { parseArgs } from "node:util";
import { parseGwei, parseUnits } from "viem";
import { DEFAULT_STATE_DIR, flagProblem, UsageError } from "../harness/cli.js";
import { connectHarness } from "../harness/control/client.js";
import { HarnessControlError, type FaultInfo, type FaultSpec, type HarnessControl } from "../harness/control/spec.js";
import type { BackgroundIo } from "./background.js";
import { harnessUrlOf } from "./stack-state.js";

/** The CLI's name of each fault, and the spec it starts from. */
const KINDS: Readonly<Record<string, { spec: Partial<FaultSpec> & { kind: FaultSpec["kind"] }; line: string }>> = {
  balance: { spec: { kind: "balance" }, line: "balance --address A --amount USDC   the address's USDC.e balance set to USDC (whole tokens, up to 6 decimals)" },
  pause: { spec: { kind: "pause" }, line: "pause                                USDC.e paused (by its pauser)" },
  blacklist: { spec: { kind: "blacklist" }, line: "blacklist --address A                the address blacklisted (by USDC.e's blacklister)" },
  "use-authorization": {
    spec: { kind: "authorization", action: "use" },
    line: "use-authorization [--payment P]      the payment's authorization submitted on chain by someone else (the payee is paid)",
  },
  "cancel-authorization": {
    spec: { kind: "authorization", action: "cancel" },
    line: "cancel-authorization [--payment P]   the payment's authorization cancelled by its payer (the nonce spent)",
  },
  time: { spec: { kind: "time" }, line: "time --seconds N                     chain time moved N seconds forward (cannot be undone)" },
  rpc: {
    spec: { kind: "rpc" },
    line: "rpc --mode refuse|delay|drop         the facilitator's JSON-RPC calls refused, delayed (--delay-ms N) or never answered; --for-calls N, --methods LIST",
  },
  busy: { spec: { kind: "busy" }, line: "busy --for-seconds N                 the facilitator answers verify, settle and lookups 429 with Retry-After" },
  blocks: { spec: { kind: "blocks" }, line: "blocks                               block production stopped (also `cronos-x402 time stop-blocks`)" },
  "facilitator-down": { spec: { kind: "facilitator-down" }, line: "facilitator-down                     the facilitator stopped, its port closed" },
  "lagging-backend": {
    spec: { kind: "lagging-backend" },
    line: "lagging-backend [--blocks N]         the endpoint reaches a backend N blocks behind (default 60): eth_getLogs cut there, the next correct send refused invalid nonce (--refusals N)",
  },
  "mempool-lost": { spec: { kind: "mempool-lost" }, line: "mempool-lost                         the node loses its pool, as a restart: its pending transactions dropped (cannot be undone)" },
  "min-fee": { spec: { kind: "min-fee" }, line: "min-fee --gwei G                     the chain's minimum gas price raised to G gwei: a fee under it is refused (insufficient fee)" },
  "no-replacement": { spec: { kind: "no-replacement" }, line: "no-replacement                       transaction replacement off: a same-nonce transaction is answered invalid nonce" },
};

const WHERE = [
  "Where the stack is (first found): --url URL, the variable HARNESS_URL (in the --write-env file), or the state",
  `file of \`cronos-x402 start --background\` in --state-dir DIR [default: ${DEFAULT_STATE_DIR}].`,
];

/** The `cronos-x402 fault --help` text. */
export function faultUsage(): string {
  return [
    "Usage: cronos-x402 fault <kind> [options]      makes a failure happen on the local stack; prints its id",
    "       cronos-x402 fault list                  the faults armed, in force and recently ended",
    "       cronos-x402 fault undo ID… | --all      undoes faults (a blacklist lifted, blocks resumed, …)",
    "       cronos-x402 fault restart-facilitator   stops the facilitator at once and starts a new one (same port and ledger)",
    "",
    "Kinds:",
    ...Object.entries(KINDS).map(([, { line }]) => `  ${line}`),
    "",
    "The last four are a Cronos node's: the stack's chains must answer as one (start --node cronos, the default).",
    "",
    "Options of every kind:",
    "  --network N        one network (cronos-testnet, cronos-mainnet); default every network of the stack",
    "  --after-verify     armed: it happens when the facilitator next finds a payment valid, before it answers",
    "                     (the settle that follows meets it); the payment's own network and authorization",
    "  --payer A          with --after-verify: only a payment of this payer fires it (balance, blacklist: --address)",
    "  --for-seconds N    it undoes itself after N seconds",
    "  --json             print the fault (or list) as JSON",
    "",
    ...WHERE,
    "Exit status: 0 done, 1 refused by the stack or the stack not reachable (one line on stderr), 2 a bad option.",
  ].join("\n");
}

/** The `cronos-x402 time --help` text. */
export function timeUsage(): string {
  return [
    "Usage: cronos-x402 time advance SECONDS [--network N]     chain time moved forward, a block mined (cannot be undone)",
    "       cronos-x402 time stop-blocks [--for-seconds N]     block production stopped (prints the fault's id)",
    "       cronos-x402 time resume-blocks [--network N]       block production resumed; what waited is mined",
    "       cronos-x402 time show                              chain time, block and blocks running, per network",
    "",
    "  --network N, --json as for `cronos-x402 fault`.",
    "",
    ...WHERE,
    "Exit status: 0 done, 1 refused by the stack or the stack not reachable, 2 a bad option.",
  ].join("\n");
}

const OPTIONS = {
  url: { type: "string" },
  "state-dir": { type: "string" },
  network: { type: "string" },
  "after-verify": { type: "boolean" },
  payer: { type: "string" },
  "for-seconds": { type: "string" },
  address: { type: "string" },
  amount: { type: "string" },
  payment: { type: "string" },
  seconds: { type: "string" },
  mode: { type: "string" },
  "delay-ms": { type: "string" },
  "for-calls": { type: "string" },
  methods: { type: "string" },
  blocks: { type: "string" },
  refusals: { type: "string" },
  gwei: { type: "string" },
  all: { type: "boolean" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>["values"];

/** Parses the arguments of `fault` / `time`; a usage error names the option. */
export function parseFaultArgs(argv: readonly string[]): { positionals: string[]; values: Values } {
  try {
    const { positionals, values } = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
    return { positionals, values };
  } catch (error) {
    throw new UsageError(flagProblem(error));
  }
}

/** A whole number option (the stack checks its range and says so). */
function whole(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,10}$/.test(value.trim())) throw new UsageError(`--${flag}: must be a whole number, got "${value}"`);
  return Number(value.trim());
}

/** The spec a `fault <kind>` command asks for. */
export function faultSpecOf(kindName: string, values: Values): FaultSpec {
  const kind = KINDS[kindName];
  if (!kind) throw new UsageError(`unknown fault "${kindName}" (kinds: ${Object.keys(KINDS).join(", ")})`);
  const spec: Record<string, unknown> = { ...kind.spec };
  const set = (name: string, value: unknown) => {
    if (value !== undefined) spec[name] = value;
  };
  set("network", values.network);
  if (values["after-verify"]) spec.trigger = "after-verify";
  set("payer", values.payer);
  set("forSeconds", whole("for-seconds", values["for-seconds"]));
  set("address", values.address);
  if (values.amount !== undefined) {
    if (!/^\d+(\.\d{1,6})?$/.test(values.amount.trim())) throw new UsageError(`--amount: must be whole USDC.e with at most 6 decimals (e.g. 0 or 2.5), got "${values.amount}"`);
    spec.amount = parseUnits(values.amount.trim(), 6).toString();
  }
  set("payment", values.payment);
  set("seconds", whole("seconds", values.seconds));
  set("mode", values.mode);
  set("delayMs", whole("delay-ms", values["delay-ms"]));
  set("forCalls", whole("for-calls", values["for-calls"]));
  if (values.methods !== undefined) spec.methods = values.methods.split(",").map((method) => method.trim()).filter(Boolean);
  set("blocks", whole("blocks", values.blocks));
  set("refusals", whole("refusals", values.refusals));
  if (values.gwei !== undefined) {
    if (!/^\d{1,21}(\.\d{1,9})?$/.test(values.gwei.trim())) throw new UsageError(`--gwei: must be gwei with at most 9 decimals (e.g. 10000 or 0.5), got "${values.gwei}"`);
    spec.minGasPrice = parseGwei(values.gwei.trim()).toString();
  }
  return spec as FaultSpec;
}

/** The controls of the stack the options name (--url, HARNESS_URL, or the state file). */
function controls(values: Values, env: NodeJS.ProcessEnv): HarnessControl {
  const url = values.url ?? (env.HARNESS_URL?.trim() || undefined);
  if (url !== undefined) return connectHarness(url);
  const found = harnessUrlOf(values["state-dir"] ?? DEFAULT_STATE_DIR);
  if ("problem" in found) throw new HarnessControlError(0, found.problem);
  return connectHarness(found.url);
}

/** One line per fault: id, state, kind, what it does. */
function faultLine(fault: FaultInfo): string {
  const extra = [
    fault.endsAt ? `until ${fault.endsAt}` : "",
    fault.txHash ? `tx ${fault.txHash}` : "",
    fault.dropped ? `${fault.dropped.length} transaction(s) dropped` : "",
    fault.error ? `error: ${fault.error}` : "",
  ]
    .filter(Boolean)
    .join("; ");
  return `${fault.id}\t${fault.state}\t${fault.kind}\t${fault.description}${extra ? ` (${extra})` : ""}`;
}

/** Runs a command against the stack; its refusals are one line on stderr and status 1. */
async function run(io: BackgroundIo, usage: () => string, work: () => Promise<void>): Promise<number> {
  try {
    await work();
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`error: ${error.message}\n\n${usage()}\n`);
      return 2;
    }
    if (error instanceof HarnessControlError) {
      io.stderr(`error: ${error.status ? `the harness refused (HTTP ${error.status}): ` : ""}${error.message}\n`);
      return 1;
    }
    throw error;
  }
}

/** `cronos-x402 fault …`: see {@link faultUsage}. Returns the exit status. */
export function runFault(argv: readonly string[], io: BackgroundIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return run(io, faultUsage, async () => {
    const { positionals, values } = parseFaultArgs(argv);
    if (values.help) return void io.stdout(`${faultUsage()}\n`);
    const [command, ...rest] = positionals;
    if (command === undefined) throw new UsageError("name a fault kind, or list, undo or restart-facilitator");
    const print = (value: unknown, line: string) => io.stdout(values.json ? `${JSON.stringify(value)}\n` : `${line}\n`);
    switch (command) {
      case "list": {
        const faults = await controls(values, env).faults();
        return print(faults, faults.map(faultLine).join("\n") || "(no faults)");
      }
      case "undo": {
        if (Boolean(values.all) === (rest.length > 0)) throw new UsageError("undo takes fault ids, or --all");
        const harness = controls(values, env);
        if (values.all) {
          const undone = await harness.reset();
          return print({ undone }, `${undone} fault(s) undone`);
        }
        const reports: FaultInfo[] = [];
        for (const id of rest) reports.push(await harness.undo(id));
        return print(reports, reports.map(faultLine).join("\n"));
      }
      case "restart-facilitator": {
        const harness = controls(values, env);
        await harness.restartFacilitator();
        const { url } = (await harness.status()).facilitator;
        return print({ facilitatorUrl: url }, `facilitator restarted at ${url}`);
      }
      default: {
        if (rest.length > 0) throw new UsageError(`unexpected argument "${rest[0]}"`);
        const spec = faultSpecOf(command, values);
        const { info } = await controls(values, env).fault(spec);
        return print(info, info.id);
      }
    }
  });
}

/** `cronos-x402 time …`: see {@link timeUsage}. Returns the exit status. */
export function runTime(argv: readonly string[], io: BackgroundIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return run(io, timeUsage, async () => {
    const { positionals, values } = parseFaultArgs(argv);
    if (values.help) return void io.stdout(`${timeUsage()}\n`);
    const [command, ...rest] = positionals;
    const print = (value: unknown, line: string) => io.stdout(values.json ? `${JSON.stringify(value)}\n` : `${line}\n`);
    const network = values.network === undefined ? {} : { network: values.network };
    const expect = (count: number) => {
      if (rest.length !== count) throw new UsageError(count === 0 ? `unexpected argument "${rest[0]}"` : `${command} takes SECONDS`);
    };
    switch (command) {
      case "advance": {
        expect(1);
        const seconds = whole("seconds", rest[0])!;
        const times = await controls(values, env).advanceTime(seconds, network);
        return print({ chainTime: times }, Object.entries(times).map(([name, time]) => `${name}\t${new Date(time * 1000).toISOString()} (${time})`).join("\n"));
      }
      case "stop-blocks": {
        expect(0);
        const forSeconds = whole("for-seconds", values["for-seconds"]);
        const { info } = await controls(values, env).stopBlocks({ ...network, ...(forSeconds !== undefined ? { forSeconds } : {}) });
        return print(info, info.id);
      }
      case "resume-blocks": {
        expect(0);
        const resumed = await controls(values, env).resumeBlocks(network);
        return print({ resumed }, `${resumed} block stop(s) undone`);
      }
      case "show": {
        expect(0);
        const status = await controls(values, env).status();
        const lines = Object.entries(status.networks).map(
          ([name, chain]) => `${name}\tchain time ${new Date(chain!.chainTime * 1000).toISOString()} (${chain!.chainTime}), block ${chain!.blockNumber}, blocks ${chain!.blocks}`,
        );
        return print(status, [...lines, `facilitator\t${status.facilitator.url} ${status.facilitator.running ? "running" : "stopped"}`].join("\n"));
      }
      default:
        throw new UsageError(command === undefined ? "name a time command: advance, stop-blocks, resume-blocks or show" : `unknown time command "${command}"`);
    }
  });
}
