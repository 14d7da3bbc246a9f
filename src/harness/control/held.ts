import type { NetworkName } from "../../protocol/networks.js";
import type { LocalChain } from "../chain.js";
import { HarnessControlError, type FaultInfo, type ParsedFaultSpec } from "./spec.js";

/** How the harness stops and starts the stack's facilitator (the stack holds it). */
export interface FacilitatorSwitch {
  url: string;
  running(): boolean;
  /** Stops it gracefully (its settles in flight finish, briefly); its port closes. */
  stop(): Promise<void>;
  /** Starts a new one on the same port, over the same ledger. */
  start(): Promise<void>;
  /** Stops it at once, its links to the chains cut, and starts a new one on the same port and ledger. */
  restart(): Promise<void>;
}

/** Options of {@link LocalHarness}. */
export interface LocalHarnessOptions {
  chains: Partial<Record<NetworkName, LocalChain>>;
  facilitator: FacilitatorSwitch;
  /** The longest one chain action may take (a transaction mined, a block, a read); default 60 s. */
  operationTimeoutMs?: number;
}

/** A fault the harness holds: armed or in force. */
export interface HeldFault {
  info: FaultInfo;
  spec: ParsedFaultSpec;
  /** Undoes what it did (set once it took effect). */
  undo?: () => Promise<void>;
  timer?: NodeJS.Timeout;
  /** Settles when a running undo has finished (an undo asked twice waits for the first). */
  undoing?: Promise<void>;
}

/** `work`, or a 504 once `timeoutMs` (the harness's operation time-out) has passed. */
export async function bounded<T>(timeoutMs: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new HarnessControlError(504, `${what} did not finish within ${timeoutMs / 1000} s`)), timeoutMs);
        timer.unref();
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A facilitator that would not start again, as a refusal saying how to retry (it stays stopped until then). */
export function startFailed(error: unknown): HarnessControlError {
  if (error instanceof HarnessControlError) return error;
  const reason = error instanceof Error ? error.message.split("\n")[0]! : String(error);
  return new HarnessControlError(409, `the facilitator did not start again: ${reason}; restartFacilitator() (POST /harness/facilitator/restart) tries again`);
}
