import type { Target } from "./target.js";
import type { FacilitatorHttp } from "./http.js";
import { KitErrorOf } from "../protocol/errors.js";

/** The two ways a facilitator may be spoken to: the Cronos dialect (x402Version 1) and x402 v2. */
export type Dialect = "cronos" | "x402-v2";

/** What a check needs beyond a facilitator URL; without it the check is skipped, saying which option provides it. */
export type Need =
  /** A funded buyer key (`--buyer-key` / `--buyer-key-file`; the local stack's buyers). */
  | "buyer"
  /** The network's JSON-RPC (`--rpc`): the chain's clock, logs, receipts, balances. */
  | "rpc"
  /** Permission to settle real payments (`--settle`). */
  | "settle"
  /** Permission to spend the caller's rate-limit quota (`--rate-limit`). */
  | "rate-limit";

/** Why a check cannot run, per need, in words for its SKIP line. */
export const NEED_REASON: Readonly<Record<Need, string>> = {
  buyer: "needs a funded buyer key (--buyer-key-file PATH or --buyer-key 0x…)",
  rpc: "needs the network's JSON-RPC (--rpc URL)",
  settle: "needs --settle (settles 1 unit = 0.000001 USDC.e twice per dialect from the buyer key)",
  "rate-limit": "needs --rate-limit (spends this IP's verify and settle quota for up to a minute)",
};

/** What one check gets to work with. */
export interface CheckContext {
  http: FacilitatorHttp;
  /** Results of earlier checks of this run that later ones build on (e.g. the payment a replay resends). */
  shared: Map<string, unknown>;
  /** A line for the person watching (waits, what was paid); not part of any result. */
  note(line: string): void;
}

/** A check of the catalog, bound to one network (or to none) and one dialect. */
export interface Check {
  /** Stable id, `area.name` (`verify.amount-below-price`); with the network it names one result. */
  id: string;
  /** What a passing facilitator does, in one line. */
  title: string;
  /** The spec row or project decision it proves (`spec 7.1 Invalid amount`, `decisions › Statuses: …`). */
  spec: string;
  dialect: Dialect;
  /** The network it runs on; absent for checks of the whole service. */
  target?: Target;
  /** The network as its dialect names it, in the result's name (default the target's network). */
  network?: string;
  needs?: readonly Need[];
  /** Spends quota: run after every other check, so the others are not throttled by it. */
  last?: boolean;
  /** Throws {@link CheckFailure} (or any error) to fail, {@link CheckSkipped} to skip; returns a note on success. */
  run(context: CheckContext): Promise<string | void>;
}

/** A check failed: what was expected and what came back. */
export class CheckFailure extends KitErrorOf("CheckFailure", "check_failed") {}

/** A check could not run here; the message says why and what would make it run. */
export class CheckSkipped extends KitErrorOf("CheckSkipped", "check_skipped") {}

/** Fails a check with "expected …, got …". */
export function fail(expected: string, got: string): never {
  throw new CheckFailure(`expected ${expected}, got ${got}`);
}

/** Skips a check with its reason. */
export function skip(reason: string): never {
  throw new CheckSkipped(reason);
}
