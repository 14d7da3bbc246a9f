// Typo detection: a variable that looks like one of ours (a typo, other words, a DATABASE_* while DATABASE_URL is unset)
// stops start-up; Kubernetes' service links never count.
import { ConfigError } from "./error.js";
import { CONFIG_VARIABLES as KNOWN_VARIABLES } from "./schema.js";

/**
 * Variables in the facilitator's own namespaces: one that the schema does not know (a typo such as
 * `CRONOS_MAINNET_RPC`) stops start-up instead of being ignored. So does any other variable within a
 * typo of a known name ({@link looksLikeOurs}) or saying one in other words ({@link sameMeaning}) and,
 * while `DATABASE_URL` is unset, any `DATABASE_*`: each would otherwise drop a setting, or leave the
 * instance on its own embedded ledger, apart from its cluster.
 */
const OWN_NAMESPACE = /^(CRONOS_|RELAYER_|RATE_LIMIT_|METRICS_|API_KEYS|LEDGER_|RECONCILE_|DASHBOARD|MAX_CONNECTIONS|CONNECTION_|HEALTH_|SETTLE_|STATE_INDEX|CATALOG_)/;

/**
 * Whether `name=value` is one of the variables Kubernetes sets for each Service in the namespace (unless
 * the pod says `enableServiceLinks: false`). For a Service `metrics`: `METRICS_SERVICE_HOST`,
 * `METRICS_SERVICE_PORT` (and `METRICS_SERVICE_PORT_<port name>`), `METRICS_PORT=tcp://10.0.0.5:9464`,
 * `METRICS_PORT_9464_TCP=tcp://…` and its `_PROTO`, `_PORT` and `_ADDR`. A Service may have any name, ours
 * included (dashboard, relayer, ledger, metrics, database, …): the shape, not the prefix, tells them.
 * `<NAME>_PORT` and `<NAME>_PORT_<n>_<PROTO>` count only with their `proto://address:port` value.
 */
function isServiceLink(name: string, value: string): boolean {
  if (/^[A-Z][A-Z0-9_]*_SERVICE_(HOST|PORT(_[A-Z0-9_]+)?)$/.test(name)) return true;
  if (/^[A-Z][A-Z0-9_]*_PORT_\d+_(TCP|UDP|SCTP)_(PROTO|PORT|ADDR)$/.test(name)) return true;
  return /^[A-Z][A-Z0-9_]*_PORT(_\d+_(TCP|UDP|SCTP))?$/.test(name) && /^(tcp|udp|sctp):\/\/\S+:\d+$/.test(value.trim());
}

/**
 * The environment without Kubernetes' service links ({@link isServiceLink}): never taken for typos, and
 * never read as one of our settings: `METRICS_PORT=tcp://10.0.0.5:9464`, set for a Service named
 * `metrics`, leaves `METRICS_PORT` at its default rather than failing to parse as a port.
 */
export function withoutServiceLinks(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name, value]) => value === undefined || !isServiceLink(name, value)));
}

/** Throws {@link ConfigError} at the first variable that is not ours but looks like one of ours, naming the likely one. */
export function assertNoUnknownVariables(env: NodeJS.ProcessEnv): void {
  const unchecked = new Set((env.UNCHECKED_VARIABLES ?? "").split(",").map((name) => name.trim()).filter(Boolean));
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || KNOWN_VARIABLES.includes(name) || unchecked.has(name)) continue;
    let suggestion: string | undefined;
    if (OWN_NAMESPACE.test(name)) {
      // The same setting in other words first (LEDGER_URL → DATABASE_URL), else the closest name of the same
      // namespace (RELAYER_KEY_FILE → RELAYER_PRIVATE_KEY_FILE, not API_KEYS_FILE).
      const namespace = KNOWN_VARIABLES.filter((known) => known.split("_")[0] === name.split("_")[0]);
      suggestion = sameMeaning(name, env) ?? closest(name, namespace.length > 0 ? namespace : KNOWN_VARIABLES);
    } else if (name.startsWith("OTEL_")) {
      // OpenTelemetry's namespace holds many variables of other signals (OTEL_BLRP_* is two edits from
      // OTEL_BSP_*): only a one-letter slip of a variable the facilitator reads counts as a typo.
      suggestion = KNOWN_VARIABLES.find((known) => known.startsWith("OTEL_") && editDistance(name.toUpperCase(), known) <= 1);
    } else if (name.startsWith("DATABASE_") && !env.DATABASE_URL) {
      suggestion = "DATABASE_URL";
    } else {
      suggestion = looksLikeOurs(name) ?? sameMeaning(name, env);
    }
    if (suggestion === undefined) continue;
    throw new ConfigError(
      `${name}: unknown variable; did you mean ${suggestion}? (the facilitator stops at a variable that looks like one of its own; if ${name} is meant for something else, name it in UNCHECKED_VARIABLES)`,
    );
  }
}

/**
 * The known variable `name` is a typo of, compared in upper case: for the short names (`PORT`, `HOST`)
 * one substituted or swapped letter (`PROT`, `HOTS`; not `PORTS` or `PORT0`, which schedulers set),
 * else up to two edits (`DATABSE_URL`, `LOGLEVEL`, `CRONOS_TESTNET_RPC_URI`). npm's own `npm_*`
 * variables (all of them under `npm start`) are never ours.
 */
function looksLikeOurs(name: string): string | undefined {
  if (name.startsWith("npm_")) return undefined;
  const upper = name.toUpperCase();
  for (const known of KNOWN_VARIABLES) {
    const short = Math.min(upper.length, known.length) <= 5;
    if (short ? upper.length === known.length && editDistance(upper, known) <= 1 : Math.abs(upper.length - known.length) <= 2 && editDistance(upper, known) <= 2) {
      return known;
    }
  }
  return undefined;
}

/**
 * Words other tools and habits use for ours, as `_`-separated word runs: a PostgreSQL or SQLite
 * database is our ledger (`DATABASE_URL` is the ledger's URL), a DSN or connection string a URL, a path
 * a file, trusted proxies `TRUST_PROXY`, a gas price the fee per gas. Applied to singular words.
 */
const SYNONYMS: ReadonlyArray<[RegExp, string]> = [
  [/(?<=^|_)(DATABASE|DB|PG|POSTGRES|POSTGRESQL|PSQL|SQLITE)(?=_|$)/g, "LEDGER"],
  [/(?<=^|_)(CONNECTION_STRING|CONNECTION_URL|CONNECTION_URI|CONN_STRING|CONNECTION|CONN|URI|DSN)(?=_|$)/g, "URL"],
  [/(?<=^|_)PATH(?=_|$)/g, "FILE"],
  [/(?<=^|_)TRUSTED(?=_|$)/g, "TRUST"],
  [/(?<=^|_)GAS_PRICE(?=_|$)/g, "FEE_PER_GAS"],
];
/** Units a name may end in, in either spelling: a unit changed or left out still names the same setting. */
const UNIT_WORDS = new Set(["SECOND", "SEC", "MS", "MILLISECOND", "MILLI", "GWEI", "WEI", "BYTE"]);

/** A word in the singular, roughly (`PROXIES` → `PROXY`, `KEYS` → `KEY`; `GAS`, `ADDRESS` and `MS` as they are). */
function singular(word: string): string {
  if (word.length > 4 && word.endsWith("IES")) return `${word.slice(0, -3)}Y`;
  if (word.length > 3 && word.endsWith("S") && !word.endsWith("SS")) return word.slice(0, -1);
  return word;
}

/** A name's words as compared for meaning: upper case, synonyms replaced, singular, a trailing unit dropped. */
function canonicalWords(name: string): string[] {
  const synonyms = (text: string) => SYNONYMS.reduce((replaced, [pattern, word]) => replaced.replace(pattern, word), text);
  // Synonyms before the singular (POSTGRES is no plural) and after it (DATABASES, URIS).
  const text = synonyms(synonyms(name.toUpperCase()).split("_").filter(Boolean).map(singular).join("_"));
  const words = text.split("_");
  while (words.length > 1 && UNIT_WORDS.has(words.at(-1)!)) words.pop();
  return words;
}

/**
 * The known variable `name` says in other words, beyond a typo's reach ({@link looksLikeOurs}): the same
 * words once singular, with synonyms and units aside (`TRUST_PROXIES`, `TRUSTED_PROXIES`, `POSTGRES_URL`,
 * `DATABASE_POOL_SIZE` → `LEDGER_POOL_SIZE`, `REVERT_PENALTY_MS`, `MAX_FEE_PER_GAS_WEI`), the first two or
 * more words of a known name (`MAX_FEE_PER_GAS`, `REVERT_PENALTY`, `BODY_LIMIT`), or its last two or more
 * (`POOL_SIZE`, `PRIVATE_KEY`). Only names of two words or more are compared (a scheduler's `PORTS` is not
 * our `PORT`; a bare `DATABASE`, `DB` or `POSTGRES` is the one exception: `DATABASE_URL`), and never a
 * name that merely extends one of ours (`DATABASE_URL_UNPOOLED` is a platform's). When the variable it
 * would stand for is set, it is another program's (platforms set `POSTGRES_URL` beside `DATABASE_URL`).
 */
function sameMeaning(name: string, env: NodeJS.ProcessEnv): string | undefined {
  if (name.startsWith("npm_")) return undefined;
  const words = canonicalWords(name);
  const key = words.join("_");
  const matches =
    key === "LEDGER"
      ? ["DATABASE_URL"]
      : KNOWN_VARIABLES.filter((known) => {
          const knownWords = canonicalWords(known);
          if (knownWords.length < 2 || words.length < 2) return false;
          const knownKey = knownWords.join("_");
          return key === knownKey || knownKey.startsWith(`${key}_`) || knownKey.endsWith(`_${key}`);
        });
  const unset = matches.filter((known) => env[known] === undefined);
  return unset.length > 0 ? closest(name.toUpperCase(), unset) : undefined;
}

/** The candidate with the smallest edit distance to `name`. */
function closest(name: string, candidates: readonly string[]): string {
  let best = candidates[0]!;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = editDistance(name, candidate);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

/** Edit distance counting an insertion, a deletion, a substitution or a swap of neighbours as one edit. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i]!;
      row[j] = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, rows[i - 2]![j - 2]! + 1);
    }
  }
  return rows[a.length]![b.length]!;
}
