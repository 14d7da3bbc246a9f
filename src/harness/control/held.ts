import type { NetworkName } from "../../protocol/networks.js";
import type { LocalChain } from "../chain.js";
import type { FaultInfo, ParsedFaultSpec } from "./spec.js";

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
