// Parsing of the HTTP edge's settings: allowed hosts, trusted proxies, connection limits, seller API keys (hashes only).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { parseHost } from "../http/hosts.js";
import { ConfigError } from "./error.js";
import type { ApiKeyConfig, HttpLimitsConfig } from "./types.js";

// --- The HTTP edge ---

/**
 * `ALLOWED_HOSTS`: comma-separated host names or IP addresses, as a client's `Host` header names this
 * service (any port). Each is kept as a URL parser reads it (lower case, IPv6 in brackets); a scheme, a
 * port, a path or a wildcard is refused, naming the entry.
 */
export function parseAllowedHosts(value: string | undefined): string[] {
  if (value === undefined) return [];
  const names: string[] = [];
  for (const entry of value.split(",").map((part) => part.trim())) {
    const host = parseHost(entry);
    if (entry === "" || !host || host.port !== "" || /[*:]/.test(entry.replace(/^\[.*\]$/, ""))) {
      throw new ConfigError(
        `ALLOWED_HOSTS: ${JSON.stringify(entry)} is not a host name; list the names clients put in the Host header, comma-separated, without scheme, port or path (e.g. pay.example.com,10.0.0.5)`,
      );
    }
    if (!names.includes(host.name)) names.push(host.name);
  }
  return names;
}

const PROXY_NAMES = ["loopback", "linklocal", "uniquelocal"];

/**
 * `TRUST_PROXY`: false, a hop count, or proxy addresses/subnets. `true` (trust every hop) is refused:
 * any client could then choose its rate-limit key with a forged `X-Forwarded-For`.
 */
export function parseTrustProxy(value: string | undefined): false | number | string[] {
  if (value === undefined || value.toLowerCase() === "false") return false;
  if (/^(true|yes|on|\*)$/i.test(value)) {
    throw new ConfigError(
      `TRUST_PROXY: "${value}" would trust every X-Forwarded-For entry, so any client could pick its rate-limit key; give the number of proxies in front (e.g. 1) or their addresses/subnets (e.g. loopback or 10.0.0.0/8)`,
    );
  }
  if (/^\d+$/.test(value)) return Number(value) === 0 ? false : Number(value);
  const entries = value.split(",").map((s) => s.trim()).filter(Boolean);
  for (const entry of entries) {
    if (!PROXY_NAMES.includes(entry) && !isAddressOrSubnet(entry)) {
      throw new ConfigError(`TRUST_PROXY: "${entry}" is not an IP address, a subnet (address/prefix) or one of ${PROXY_NAMES.join(", ")}`);
    }
  }
  return entries;
}

function isAddressOrSubnet(entry: string): boolean {
  const [address = "", prefix, ...rest] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (prefix === undefined) return true;
  // proxy-addr also takes an IPv4 netmask (10.0.0.0/255.0.0.0).
  if (family === 4 && isIP(prefix) === 4) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128);
}

/** `MAX_CONNECTIONS_PER_CLIENT` when unset: a tenth of `MAX_CONNECTIONS` (at least 1), at most 100. */
export function defaultConnectionsPerClient(maxConnections: number): number {
  return Math.max(1, Math.min(100, Math.floor(maxConnections / 10)));
}

/** The listeners' time-outs and connection caps, refusing combinations Node or fairness cannot keep. */
export function httpLimits(requestTimeoutMs: number, headersTimeoutMs: number, maxConnections: number, perClient: number | undefined): Omit<HttpLimitsConfig, "connectionQueueMs"> {
  // Node refuses a headers time-out longer than the request time-out.
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(`HEADERS_TIMEOUT_MS: ${headersTimeoutMs} is longer than REQUEST_TIMEOUT_MS ${requestTimeoutMs}`);
  }
  // A cap at or above the server's own lets one client hold every place: the fairness it exists for is gone.
  if (perClient !== undefined && perClient > 0 && perClient >= maxConnections) {
    throw new ConfigError(
      `MAX_CONNECTIONS_PER_CLIENT: ${perClient} is not below MAX_CONNECTIONS ${maxConnections}, so one client could hold every connection; set it lower (unset: ${defaultConnectionsPerClient(maxConnections)}, a tenth of MAX_CONNECTIONS, at most 100), or 0 for no per-client cap`,
    );
  }
  return { requestTimeoutMs, headersTimeoutMs, maxConnections, maxConnectionsPerClient: perClient ?? defaultConnectionsPerClient(maxConnections) };
}

const API_KEY = /^[A-Za-z0-9._~+/=-]{16,512}$/;

/**
 * Seller API keys from `API_KEYS` (comma-separated) or `API_KEYS_FILE` (one per line, `#` comments,
 * optionally `verify=N settle=N` and any number of `payTo=0x…` after the key: the seller's own addresses, under
 * which its settlements are listed in the discovery catalog). Keeps hashes only; messages name the position,
 * never a key.
 */
export function readApiKeys(inline: string | undefined, file: string | undefined): ApiKeyConfig[] {
  if (inline && file) throw new ConfigError("API_KEYS / API_KEYS_FILE: set one, not both");
  const lines: Array<{ where: string; text: string }> = [];
  if (inline) {
    inline.split(",").map((s) => s.trim()).filter(Boolean).forEach((text, index) => lines.push({ where: `API_KEYS: key #${index + 1}`, text }));
  } else if (file) {
    let raw: string;
    try {
      raw = readFileSync(file, "utf8");
    } catch (error) {
      throw new ConfigError(`API_KEYS_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
    raw.split(/\r?\n/).forEach((line, index) => {
      const text = line.trim();
      if (text !== "" && !text.startsWith("#")) lines.push({ where: `API_KEYS_FILE: line ${index + 1}`, text });
    });
    if (lines.length === 0) throw new ConfigError(`API_KEYS_FILE: no key found in ${file}`);
  }
  const seen = new Map<string, string>();
  return lines.map(({ where, text }): ApiKeyConfig => {
    const [key = "", ...settings] = text.split(/\s+/);
    if (!API_KEY.test(key)) throw new ConfigError(`${where}: a key is 16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -`);
    if (settings.length > 0 && !file) throw new ConfigError(`${where}: per-key settings go in API_KEYS_FILE`);
    const sha256 = createHash("sha256").update(key).digest("hex");
    const earlier = seen.get(sha256);
    if (earlier) throw new ConfigError(`${where}: repeats the key of ${earlier.replace(/^API_KEYS(_FILE)?: /, "")}`);
    seen.set(sha256, where);
    const entry: ApiKeyConfig = { id: sha256.slice(0, 12), sha256 };
    for (const setting of settings) {
      const payTo = /^payTo=(0x[0-9a-fA-F]{40})$/.exec(setting);
      if (payTo) {
        entry.payTo = [...new Set([...(entry.payTo ?? []), payTo[1]!.toLowerCase()])];
        continue;
      }
      const match = /^(verify|settle)=(\d+)$/.exec(setting);
      // Not echoed: a second key pasted on the line would be a secret.
      if (!match) throw new ConfigError(`${where}: after the key, only verify=N, settle=N and payTo=<address> may follow`);
      entry[match[1] === "verify" ? "verifyPerMinute" : "settlePerMinute"] = Number(match[2]);
    }
    return entry;
  });
}
