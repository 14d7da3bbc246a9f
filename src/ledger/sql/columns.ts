import { getAddress, type Address } from "viem";

// Values as the columns hold them: addresses, hashes and nonces lower-case; read back, addresses checksummed.

export const lower = (value: string) => value.toLowerCase();
// Checksumming costs a keccak; the same few addresses (tokens, relayers, busy payers) come back all the time.
const checksums = new Map<string, Address>();
export function checksum(value: string): Address {
  let address = checksums.get(value);
  if (!address) {
    if (checksums.size >= 10_000) checksums.clear();
    checksums.set(value, (address = getAddress(value)));
  }
  return address;
}
export const num = (value: unknown) => (value === null || value === undefined ? undefined : Number(value));
export const str = (value: unknown) => (value === null || value === undefined ? undefined : String(value));
export const big = (value: unknown) => (value === null || value === undefined ? undefined : BigInt(value as string));
export const placeholders = (count: number) => Array.from({ length: count }, () => "?").join(", ");
