// Parsing of the values the schema leaves as text: RPC and database URLs, relayer keys, gwei and wei, gas caps, catalog bounds.
import { readFileSync } from "node:fs";
import { isHex, parseGwei, type Hex } from "viem";
import { ConfigError } from "./error.js";
import type { CatalogConfig } from "./types.js";

/** `DATABASE_URL=` (set, but empty) is refused: taken as unset, it would start the instance on its own embedded ledger. */
export function assertDatabaseUrlNotEmpty(env: NodeJS.ProcessEnv): void {
  if (env.DATABASE_URL === undefined || env.DATABASE_URL.trim() !== "") return;
  throw new ConfigError(
    "DATABASE_URL: set, but empty; the instance would start on its own embedded ledger, apart from any instances sharing a database (give the PostgreSQL URL, or unset it to use the embedded ledger on purpose)",
  );
}

/** `DATABASE_URL`: a postgres:// (or postgresql://) URL. */
export function parseDatabaseUrl(value: string): string {
  // The message never repeats the value: it may carry a password.
  if (!/^postgres(ql)?:\/\/[^\s]+$/.test(value)) throw new ConfigError("DATABASE_URL: must be a postgres:// (or postgresql://) URL");
  return value;
}

// --- RPC failover ---

/**
 * `CRONOS_*_RPC_URL`: one URL or several, comma-separated, in order of preference. Messages name a URL
 * by its position, never by its text (its path or query may carry an API key).
 */
export function parseRpcUrls(variable: string, value: string | undefined): string[] {
  if (value === undefined) return [];
  const urls = value.split(",").map((url) => url.trim());
  const several = urls.length > 1;
  const which = (index: number) => (several ? `URL #${index + 1}` : "the URL");
  urls.forEach((url, index) => {
    if (url === "") throw new ConfigError(`${variable}: ${which(index)} is empty (URLs are separated by single commas)`);
    if (!/^(https?|wss?):\/\/[^/?#]/.test(url)) throw new ConfigError(`${variable}: ${several ? `${which(index)} ` : ""}must be an http(s) or ws(s) URL`);
    const earlier = urls.indexOf(url);
    if (earlier < index) throw new ConfigError(`${variable}: ${which(index)} repeats URL #${earlier + 1}`);
  });
  return urls;
}

/** A gas limit a node accepts for one call: at most 2^24 (EIP-7825's transaction cap). */
export function gasCap(variable: string, value: number): number {
  if (value > 16_777_216) throw new ConfigError(`${variable}: must be at most 16777216 (one transaction's gas cap), got "${value}"`);
  return value;
}

/** `RELAYER_PRIVATE_KEY` (comma- or space-separated) or `RELAYER_PRIVATE_KEY_FILE`: one or more 32-byte hex keys. */
export function readRelayerKeys(inline: string | undefined, file: string | undefined): Hex[] {
  if (inline && file) throw new ConfigError("RELAYER_PRIVATE_KEY / RELAYER_PRIVATE_KEY_FILE: set one, not both");
  let raw = inline;
  let source = "RELAYER_PRIVATE_KEY";
  if (file) {
    source = "RELAYER_PRIVATE_KEY_FILE";
    try {
      raw = readFileSync(file, "utf8");
    } catch (error) {
      throw new ConfigError(`RELAYER_PRIVATE_KEY_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
  }
  if (!raw) throw new ConfigError("RELAYER_PRIVATE_KEY: required (the key that sends settle transactions), or RELAYER_PRIVATE_KEY_FILE");
  const keys = raw.split(/[\s,]+/).filter(Boolean).map((k) => (k.startsWith("0x") ? k : `0x${k}`));
  keys.forEach((key, index) => {
    // The message names the position, never the value.
    if (!isHex(key) || key.length !== 66) throw new ConfigError(`${source}: key #${index + 1} is not a 32-byte hex private key`);
  });
  if (keys.length === 0) throw new ConfigError(`${source}: no key found`);
  return keys as Hex[];
}

// --- A transaction's life ---

/** A positive number of gwei (up to 9 decimals), in wei. */
export function parseGweiVar(variable: string, text: string): bigint {
  if (!/^\d+(\.\d{1,9})?$/.test(text) || parseGwei(text) === 0n) {
    throw new ConfigError(`${variable}: must be a positive number of gwei (up to 9 decimals), got "${text}"`);
  }
  return parseGwei(text);
}

/** `RELAYER_MIN_BALANCE_WEI`: a whole number of wei, 1 when unset. */
export function parseWei(value: string | undefined): bigint {
  if (value === undefined) return 1n;
  if (!/^\d+$/.test(value)) throw new ConfigError(`RELAYER_MIN_BALANCE_WEI: must be a whole number of wei, got "${value}"`);
  return BigInt(value);
}

/** One seller's bound cannot exceed the whole catalog's: it would never bind. */
export function catalogBounds(maxEntries: number, maxEntriesPerSeller: number): CatalogConfig {
  if (maxEntriesPerSeller > maxEntries) {
    throw new ConfigError(`CATALOG_MAX_ENTRIES_PER_SELLER: must be at most CATALOG_MAX_ENTRIES (${maxEntries}), got "${maxEntriesPerSeller}"`);
  }
  return { maxEntries, maxEntriesPerSeller };
}
