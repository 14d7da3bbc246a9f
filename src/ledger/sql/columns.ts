import { getAddress, type Address } from "viem";

// Values as the columns hold them: addresses, hashes and nonces lower-case; read back, addresses checksummed.

export const lower = (value: string) => value.toLowerCase();
// Checksumming costs a keccak; the same few addresses (tokens, relayers, busy payers) come back all the time.
const checksums = new Map<string, Address>();
/** A stored (lower-case) address, checksummed. */
export function checksum(value: string): Address {
  let address = checksums.get(value);
  if (!address) {
    if (checksums.size >= 10_000) checksums.clear();
    checksums.set(value, (address = getAddress(value)));
  }
  return address;
}

/**
 * A BIGINT column (and a COUNT, SUM or MIN) as the drivers give it: a number from SQLite, a decimal string from
 * PostgreSQL. INTEGER columns are numbers from both; TEXT columns (token amounts among them) strings.
 */
export type Int8 = number | string;

/** A nullable BIGINT column as a number, or undefined. */
export const num = (value: Int8 | null | undefined) => (value === null || value === undefined ? undefined : Number(value));
/** A nullable BIGINT (or decimal TEXT) column as a bigint, or undefined. */
export const big = (value: Int8 | null | undefined) => (value === null || value === undefined ? undefined : BigInt(value));
/** `count` placeholders: `?, ?, ?`. */
export const placeholders = (count: number) => Array.from({ length: count }, () => "?").join(", ");
