import { decodeEventLog, getAbiItem, hexToBytes, keccak256, toEventSelector, type Address, type Hex } from "viem";
import { tokenAbi } from "../chain/token-abi.js";

/** What the index learns from one of the token's logs. */
export type TokenEvent =
  | { kind: "transfer"; from: Address; to: Address; value: bigint }
  /** `AuthorizationUsed` or `AuthorizationCanceled`: the nonce can never be used again. */
  | { kind: "nonce"; authorizer: Address; nonce: Hex }
  | { kind: "pause"; paused: boolean };

/** A token log as an RPC returns it. */
export interface RawLog {
  address: Address;
  topics: readonly Hex[];
  data: Hex;
  blockHash: Hex | null;
  blockNumber: bigint | null;
  logIndex: number | null;
}

/** The two events that spend an authorization nonce: what the nonce backfill asks for. */
export const NONCE_EVENTS = [getAbiItem({ abi: tokenAbi, name: "AuthorizationUsed" }), getAbiItem({ abi: tokenAbi, name: "AuthorizationCanceled" })] as const;

const TOPIC0 = new Set<string>(
  [getAbiItem({ abi: tokenAbi, name: "Transfer" }), ...NONCE_EVENTS, getAbiItem({ abi: tokenAbi, name: "Pause" }), getAbiItem({ abi: tokenAbi, name: "Unpause" })].map((event) =>
    toEventSelector(event),
  ),
);

/** The index's reading of a token log; undefined for a log it has no use for (Approval, Mint, …). */
export function tokenEvent(log: RawLog): TokenEvent | undefined {
  const topic0 = log.topics[0];
  if (!topic0 || !TOPIC0.has(topic0)) return undefined;
  const event = decodeEventLog({ abi: tokenAbi, topics: log.topics as [Hex, ...Hex[]], data: log.data, strict: true });
  switch (event.eventName) {
    case "Transfer":
      return { kind: "transfer", from: event.args.from, to: event.args.to, value: event.args.value };
    case "AuthorizationUsed":
    case "AuthorizationCanceled":
      return { kind: "nonce", authorizer: event.args.authorizer, nonce: event.args.nonce };
    case "Pause":
      return { kind: "pause", paused: true };
    case "Unpause":
      return { kind: "pause", paused: false };
    default:
      return undefined;
  }
}

/**
 * Whether a block's 2048-bit `logsBloom` may hold a log of `address` (false: it certainly holds none).
 * The bloom sets three bits per address, each from a pair of bytes of the address's keccak-256.
 */
export function bloomMayContain(bloom: Hex, address: Address): boolean {
  const bits = hexToBytes(bloom);
  if (bits.length !== 256) return true; // not a bloom we can read: assume it may
  const hash = hexToBytes(keccak256(address));
  for (let i = 0; i < 6; i += 2) {
    const bit = ((hash[i]! << 8) | hash[i + 1]!) & 2047;
    if ((bits[255 - (bit >> 3)]! & (1 << (bit & 7))) === 0) return false;
  }
  return true;
}
