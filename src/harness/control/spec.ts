// What the local stack's fault and time controls accept and report: plain data, shared by the in-process
// API (stack.harness), its HTTP endpoint (/harness/...), the HTTP client and the CLI. Loads no Hardhat.
import { getAddress, type Address } from "viem";
import { z } from "zod";
import { describeZodError } from "../../protocol/schemas.js";
import { networkOfAnyForm } from "../../protocol/x402v2.js";
import type { NetworkName } from "../../protocol/networks.js";
import { KitError } from "../../protocol/errors.js";

/** Faults in force or armed at once, per stack: past this, a new one is refused until some are undone. */
export const MAX_FAULTS = 100;
/** Ended faults kept for `faults()` and an idempotent undo: the most recent ones. */
export const MAX_ENDED_FAULTS = 100;
/** The longest a fault may be given (`forSeconds`): an hour. */
export const MAX_FAULT_SECONDS = 3_600;
/** The longest RPC delay: two minutes. */
export const MAX_DELAY_MS = 120_000;
/** The most calls an RPC fault may be given (`forCalls`). */
export const MAX_FAULT_CALLS = 1_000_000;
/** The furthest chain time moves in one step: ten years. */
export const MAX_ADVANCE_SECONDS = 10 * 365 * 86_400;
/** The furthest behind the head a lagging backend may be, in blocks. */
export const MAX_LAG_BLOCKS = 1_000_000;
/** The most correct sends a lagging backend may refuse. */
export const MAX_LAG_REFUSALS = 1_000;
/** How far behind a lagging backend is unless told: the 60 blocks of the failure this fault reproduces (issue 38). */
export const DEFAULT_LAG_BLOCKS = 60;
/** The largest body the control endpoint reads. */
export const CONTROL_BODY_LIMIT_BYTES = 16 * 1024;

const networkSchema = z
  .string({ error: "must be a network name: cronos-testnet, cronos-mainnet (or cronos, eip155:338, eip155:25)" })
  .transform((raw, ctx): NetworkName => {
    const name = raw === "testnet" ? "cronos-testnet" : raw === "mainnet" ? "cronos-mainnet" : networkOfAnyForm(raw);
    if (name) return name;
    ctx.addIssue({ code: "custom", message: `unknown network "${raw.slice(0, 64)}" (cronos-testnet, cronos-mainnet)` });
    return z.NEVER;
  });
const network = networkSchema;

/** A network's canonical name from any form the controls take (`testnet`, `cronos`, `eip155:338`, …); undefined when unknown. */
export function parseNetwork(raw: string): NetworkName | undefined {
  const parsed = networkSchema.safeParse(raw);
  return parsed.success ? parsed.data : undefined;
}

const address = z
  .string({ error: "must be a 0x address" })
  .regex(/^0x[0-9a-fA-F]{40}$/, "must be a 0x address of 40 hex digits")
  .transform((raw) => getAddress(raw));
const MAX_UINT256 = 2n ** 256n - 1n;
/** Base units (USDC.e has 6 decimals): a decimal string, a bigint or a safe integer. */
const AMOUNT = "must be a whole number of base units (1 USDC.e = 1000000), as a string";
const amount = z
  .union([z.string().regex(/^\d{1,78}$/, AMOUNT), z.bigint(), z.number().int(AMOUNT).min(0, AMOUNT).max(Number.MAX_SAFE_INTEGER, AMOUNT)], { error: AMOUNT })
  .transform((raw) => BigInt(raw))
  .refine((value) => value >= 0n && value <= MAX_UINT256, "must be from 0 to 2^256 - 1");
const seconds = (max: number) => z.number({ error: `must be a whole number of seconds from 1 to ${max}` }).int(`must be a whole number of seconds from 1 to ${max}`).min(1, `must be from 1 to ${max}`).max(max, `must be from 1 to ${max}`);
const forSeconds = seconds(MAX_FAULT_SECONDS);
const trigger = z.enum(["now", "after-verify"], { error: 'must be "now" or "after-verify"' }).default("now");

/**
 * When a fault happens: `now`, or `after-verify`: armed, it happens the next time the facilitator finds a
 * payment valid (of `payer`, on `network`, when given), before that verify is answered, so the settle that
 * follows meets it. For a balance or blacklist fault, `payer` defaults to its `address`.
 */
const when = { network: network.optional(), trigger, payer: address.optional() };

const balanceSpec = z.strictObject({
  kind: z.literal("balance"),
  /** Whose USDC.e balance to set (moved to or from a sink address, or minted: real Transfer events). */
  address,
  /** The new balance in base units. */
  amount,
  ...when,
});
const pauseSpec = z.strictObject({ kind: z.literal("pause"), ...when });
const blacklistSpec = z.strictObject({ kind: z.literal("blacklist"), address, ...when });
const authorizationSpec = z
  .strictObject({
    kind: z.literal("authorization"),
    /** `use`: someone submits it on chain (the payee is paid); `cancel`: the payer cancels its nonce. */
    action: z.enum(["use", "cancel"], { error: 'must be "use" or "cancel"' }),
    /** The `X-PAYMENT` or `PAYMENT-SIGNATURE` value; with `after-verify`, the payment just verified instead. */
    payment: z.string({ error: "must be the X-PAYMENT or PAYMENT-SIGNATURE value" }).min(1).max(8_192, "must be at most 8192 characters").optional(),
    /** The payer's key, for `cancel` by a payer that is not one of the stack's accounts. Never reported back. */
    privateKey: z.string().regex(/^0x[0-9a-fA-F]{64}$/, "must be a 0x private key of 64 hex digits").optional(),
    ...when,
  })
  .refine((spec) => spec.trigger === "after-verify" || spec.payment !== undefined, { message: 'needs `payment` (the X-PAYMENT or PAYMENT-SIGNATURE value), or trigger "after-verify"', path: ["payment"] })
  .refine((spec) => spec.trigger === "now" || spec.payment === undefined, { message: 'with trigger "after-verify" the payment is the one verified: leave `payment` out', path: ["payment"] });
const rpcSpec = z
  .strictObject({
    kind: z.literal("rpc"),
    /** `refuse`: the connection is refused; `delay`: answers come `delayMs` late; `drop`: the call reaches the chain, its answer never comes back (the caller times out). */
    mode: z.enum(["refuse", "delay", "drop"], { error: 'must be "refuse", "delay" or "drop"' }),
    delayMs: z.number({ error: `must be a whole number of milliseconds from 1 to ${MAX_DELAY_MS}` }).int().min(1).max(MAX_DELAY_MS).optional(),
    forSeconds: forSeconds.optional(),
    forCalls: z.number({ error: `must be a whole number from 1 to ${MAX_FAULT_CALLS}` }).int().min(1).max(MAX_FAULT_CALLS).optional(),
    /** Only these JSON-RPC methods (e.g. `eth_sendRawTransaction`); default every one. */
    methods: z
      .array(z.string().regex(/^[A-Za-z0-9_]{1,64}$/, "must be JSON-RPC method names"), { error: "must be a list of JSON-RPC method names" })
      .min(1)
      .max(32, "must name at most 32 methods")
      .optional(),
    ...when,
  })
  .refine((spec) => (spec.mode === "delay") === (spec.delayMs !== undefined), { message: 'delayMs goes with mode "delay", and only with it', path: ["delayMs"] });
const timeSpec = z.strictObject({
  kind: z.literal("time"),
  /** How far chain time moves forward (a block is mined carrying it, unless blocks are stopped). */
  seconds: seconds(MAX_ADVANCE_SECONDS),
  ...when,
});
const busySpec = z.strictObject({
  kind: z.literal("busy"),
  /** How long verify, settle and the status lookups answer 429 (`Retry-After`: the seconds left). */
  forSeconds,
  trigger,
  payer: address.optional(),
});
const blocksSpec = z.strictObject({ kind: z.literal("blocks"), forSeconds: forSeconds.optional(), ...when });
const whole = (min: number, max: number) => z.number({ error: `must be a whole number from ${min} to ${max}` }).int(`must be a whole number from ${min} to ${max}`).min(min, `must be from ${min} to ${max}`).max(max, `must be from ${min} to ${max}`);
// The Cronos node's faults (a chain started with node "cronos"): what a real endpoint does.
const laggingBackendSpec = z.strictObject({
  kind: z.literal("lagging-backend"),
  /** How far behind the head the backend is: its `eth_getLogs` end there, its check state is the sender's nonce there. */
  blocks: whole(1, MAX_LAG_BLOCKS).default(DEFAULT_LAG_BLOCKS),
  /** Correct sends it refuses with the invalid-nonce answer; then only its log reads lag. */
  refusals: whole(0, MAX_LAG_REFUSALS).default(1),
  /**
   * False (default): each transaction is refused once, its next try reaching a backend that is current; true:
   * the endpoint keeps the client on the lagging backend, and every try is refused while refusals are left.
   */
  sticky: z.boolean({ error: "must be true or false" }).default(false),
  forSeconds: forSeconds.optional(),
  ...when,
});
const mempoolLostSpec = z.strictObject({ kind: z.literal("mempool-lost"), ...when });
const WEI = "must be a whole number of wei from 1 to 10^30 (1 gwei = 1000000000), as a string";
const minFeeSpec = z.strictObject({
  kind: z.literal("min-fee"),
  /** The chain's minimum gas price, in wei. */
  minGasPrice: z
    .union([z.string().regex(/^\d{1,31}$/, WEI), z.bigint(), z.number().int(WEI).min(1, WEI).max(Number.MAX_SAFE_INTEGER, WEI)], { error: WEI })
    .transform((raw) => BigInt(raw))
    .refine((value) => value >= 1n && value <= 10n ** 30n, WEI),
  forSeconds: forSeconds.optional(),
  ...when,
});
const noReplacementSpec = z.strictObject({ kind: z.literal("no-replacement"), forSeconds: forSeconds.optional(), ...when });
const facilitatorDownSpec = z.strictObject({ kind: z.literal("facilitator-down"), forSeconds: forSeconds.optional() });

/** Every fault, told apart by `kind`. */
export const faultSpecSchema = z.discriminatedUnion(
  "kind",
  [balanceSpec, pauseSpec, blacklistSpec, authorizationSpec, timeSpec, rpcSpec, busySpec, blocksSpec, facilitatorDownSpec, laggingBackendSpec, mempoolLostSpec, minFeeSpec, noReplacementSpec],
  { error: "must be one of balance, pause, blacklist, authorization, time, rpc, busy, blocks, facilitator-down, lagging-backend, mempool-lost, min-fee, no-replacement" },
);

/** A fault as asked for (amounts as bigint, number or decimal string). */
export type FaultSpec = z.input<typeof faultSpecSchema>;
/** A fault as checked: networks canonical, addresses checksummed, amounts bigint, `trigger` set. */
export type ParsedFaultSpec = z.output<typeof faultSpecSchema>;
export type FaultKind = ParsedFaultSpec["kind"];
export const FAULT_KINDS: readonly FaultKind[] = [
  "balance",
  "pause",
  "blacklist",
  "authorization",
  "time",
  "rpc",
  "busy",
  "blocks",
  "facilitator-down",
  "lagging-backend",
  "mempool-lost",
  "min-fee",
  "no-replacement",
];
/** The faults of a Cronos node (a chain started with node `cronos`). */
export const NODE_FAULT_KINDS: ReadonlySet<FaultKind> = new Set(["lagging-backend", "mempool-lost", "min-fee", "no-replacement"]);

/** The body of `POST /harness/time/advance`. */
export const advanceSchema = z.strictObject({ seconds: seconds(MAX_ADVANCE_SECONDS), network: network.optional() });
/** The body of `POST /harness/time/stop-blocks`. */
export const stopBlocksSchema = z.strictObject({ network: network.optional(), forSeconds: forSeconds.optional() });

/** A spec checked, or the first problem as one line naming the field. */
export function parseFaultSpec(input: unknown): { ok: true; spec: ParsedFaultSpec } | { ok: false; problem: string } {
  const parsed = faultSpecSchema.safeParse(input);
  return parsed.success ? { ok: true, spec: parsed.data } : { ok: false, problem: describeZodError(parsed.error) };
}

/** Where a fault is in its life. */
export type FaultState = "armed" | "active" | "ended" | "failed";

/** A fault as reported (plain JSON: amounts as decimal strings, a `cancel` key never included). */
export interface FaultInfo {
  id: string;
  kind: FaultKind;
  state: FaultState;
  /** What was asked, as checked (no private key). */
  spec: Record<string, unknown>;
  /** One line: what it does. */
  description: string;
  createdAt: string;
  /** When it took effect (for `after-verify`: when it fired). */
  appliedAt?: string;
  /** When it ends by itself (`forSeconds`). */
  endsAt?: string;
  /** RPC faults with `forCalls`: calls it still takes. */
  callsLeft?: number;
  /** A lagging backend: the correct sends it still refuses (every network's summed). */
  refusalsLeft?: number;
  /** A lost mempool: the transactions dropped from it. */
  dropped?: string[];
  endedAt?: string;
  /** A time fault's chain time after it (Unix seconds, per network). */
  chainTime?: ChainTimes;
  /** An authorization fault's transaction (the `transferWithAuthorization` or `cancelAuthorization` that spent the nonce). */
  txHash?: string;
  /** Why it failed to take effect, or to be undone. */
  error?: string;
}

/** The chain time (a Unix time in seconds) of each network. */
export type ChainTimes = Partial<Record<NetworkName, number>>;

/** What `GET /harness` answers. */
export interface HarnessStatus {
  facilitator: { url: string; running: boolean };
  networks: Partial<Record<NetworkName, { chainTime: number; blockNumber: number; blocks: "running" | "stopped" }>>;
  faults: FaultInfo[];
}

/** A fault made or armed: what it is, and how to undo it. */
export interface FaultHandle {
  readonly id: string;
  readonly kind: FaultKind;
  /** The fault as it was when made (its state then: `armed` or `active`; `ended` at once for a nonce spent or time moved: neither goes back). */
  readonly info: FaultInfo;
  /** Undoes it (disarms it when it has not fired); idempotent. Resolves to its final report. */
  undo(): Promise<FaultInfo>;
}

/**
 * The fault and time controls of a local stack: `stack.harness` in its process, {@link connectHarness} over
 * HTTP from another (the control endpoint, `HARNESS_URL`). Every fault makes the real cause happen on the
 * local chains or in the facilitator, never a made-up answer; whatever a test leaves is undone when the
 * stack stops.
 */
export interface HarnessControl {
  /** Makes a fault happen now, or arms it (`trigger: "after-verify"`); its handle undoes it. */
  fault(spec: FaultSpec): Promise<FaultHandle>;
  /** The faults armed or in force, then the recently ended ones. */
  faults(): Promise<FaultInfo[]>;
  /** Undoes the fault `id`; resolves to its final report (also for one that already ended). */
  undo(id: string): Promise<FaultInfo>;
  /** Undoes every fault armed or in force; resolves to how many there were. */
  reset(): Promise<number>;
  /**
   * Moves chain time forward by `seconds` (every network, or `network`) and mines a block, so an
   * authorization expires for real. A chain does not go back: this cannot be undone.
   */
  advanceTime(seconds: number, options?: { network?: string }): Promise<ChainTimes>;
  /** Stops block production (every network, or `network`): a fault, whose handle resumes it. */
  stopBlocks(options?: { network?: string; forSeconds?: number }): Promise<FaultHandle>;
  /** Undoes every `blocks` fault (of `network`, when given): mining resumes, what waited is mined. Resolves to how many. */
  resumeBlocks(options?: { network?: string }): Promise<number>;
  /**
   * Stops the facilitator at once (connections cut, its settles in flight not waited for) and starts a
   * new one on the same port and ledger, which finishes those settles from the ledger. Resolves once
   * the new one listens. A facilitator left stopped by a start that failed (its port taken meanwhile: a
   * 409) is started by it; one held down by a `facilitator-down` fault is not (409: undo that fault).
   */
  restartFacilitator(): Promise<void>;
  /** Chain time and blocks of each network, the facilitator up or down, the faults. */
  status(): Promise<HarnessStatus>;
}

/** A public report of a spec: bigints as decimal strings, the private key left out. */
export function publicSpec(spec: ParsedFaultSpec): Record<string, unknown> {
  const { privateKey: _secret, ...rest } = spec as ParsedFaultSpec & { privateKey?: string };
  return Object.fromEntries(Object.entries(rest).map(([key, value]) => [key, typeof value === "bigint" ? value.toString() : value]));
}

/** The one-line description of a fault. */
export function describeFault(spec: ParsedFaultSpec): string {
  const where = "network" in spec && spec.network ? ` on ${spec.network}` : "";
  const lasting = "forSeconds" in spec && spec.forSeconds ? ` for ${spec.forSeconds} s` : "";
  const after = spec.kind !== "facilitator-down" && spec.trigger === "after-verify" ? `, after the next valid verify${payerOf(spec) ? ` of ${payerOf(spec)}` : ""}` : "";
  switch (spec.kind) {
    case "balance":
      return `USDC.e balance of ${spec.address} set to ${spec.amount} base units${where}${after}`;
    case "pause":
      return `USDC.e paused${where}${after}`;
    case "blacklist":
      return `${spec.address} blacklisted by USDC.e${where}${after}`;
    case "time":
      return `chain time moved ${spec.seconds} s forward${where}${after}`;
    case "authorization":
      return `${spec.trigger === "after-verify" ? "the verified authorization" : "the payment's authorization"} ${spec.action === "use" ? "used on chain directly" : "cancelled by its payer"}${where}${after}`;
    case "rpc": {
      const what = spec.mode === "refuse" ? "refused" : spec.mode === "delay" ? `delayed ${spec.delayMs} ms` : "answered never (dropped)";
      const calls = spec.forCalls ? ` for ${spec.forCalls} call(s)` : "";
      return `the facilitator's JSON-RPC calls${spec.methods ? ` (${spec.methods.join(", ")})` : ""} ${what}${where}${lasting}${calls}${after}`;
    }
    case "busy":
      return `the facilitator busy (verify, settle and lookups answer 429 with Retry-After)${lasting}${after}`;
    case "blocks":
      return `block production stopped${where}${lasting}${after}`;
    case "facilitator-down":
      return `the facilitator stopped (its port closed)${lasting}`;
    case "lagging-backend":
      return `the JSON-RPC endpoint reaching a backend ${spec.blocks} blocks behind: eth_getLogs answered up to there only, the next ${spec.refusals} correct send(s) refused with the invalid-nonce answer (${spec.sticky ? "every try" : "each transaction once"})${where}${lasting}${after}`;
    case "mempool-lost":
      return `the node's mempool lost, as a restart: its pending transactions dropped${where}${after}`;
    case "min-fee":
      return `the minimum gas price raised to ${spec.minGasPrice} wei${where}${lasting}${after}`;
    case "no-replacement":
      return `transaction replacement turned off: a same-nonce transaction answered invalid nonce${where}${lasting}${after}`;
  }
}

/** Whose valid verify fires an `after-verify` fault: `payer`, else a balance or blacklist fault's address. */
export function payerOf(spec: ParsedFaultSpec): Address | undefined {
  if (spec.kind === "facilitator-down") return undefined;
  if (spec.payer) return spec.payer;
  return spec.kind === "balance" || spec.kind === "blacklist" ? spec.address : undefined;
}

/** A refusal of the controls: the HTTP status it is answered with, and one line. */
export class HarnessControlError extends KitError<"control_refused"> {
  override name = "HarnessControlError";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super("control_refused", message, { docsPath: "docs/failures.md#every-failure-on-demand" });
  }
}
