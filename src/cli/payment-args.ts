// What `cronos-x402 sign` and `cronos-x402 pay` share: the payer's key, the validity window and nonce, the
// changes made on purpose, and reading a 402 answer as a file, stdin or `curl -si` output. Parsing only: the
// signing is the buyer SDK's (src/buyer/payment-terms.ts).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { Hex, LocalAccount } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { PaymentDialect, PaymentRequiredAnswer } from "../buyer/offers.js";
import type { DomainChanges, PaymentChanges } from "../buyer/payment-terms.js";
import { PaymentError } from "../buyer/errors.js";
import { flagProblem, UsageError } from "../harness/cli.js";
import { decodeBase64Json } from "../protocol/header.js";
import { X402V2Header } from "../protocol/x402v2.js";

/** The most a 402 answer read from a file or stdin may hold: 1 MiB (a 402 is a few KiB). */
export const MAX_402_BYTES = 1024 * 1024;

/** The options both commands take (parseArgs' table). */
export const PAYMENT_OPTIONS = {
  network: { type: "string" },
  "pay-to": { type: "string" },
  amount: { type: "string" },
  asset: { type: "string" },
  dialect: { type: "string" },
  key: { type: "string" },
  "key-file": { type: "string" },
  "valid-after": { type: "string" },
  "valid-before": { type: "string" },
  nonce: { type: "string" },
  "domain-name": { type: "string" },
  "domain-version": { type: "string" },
  "chain-id": { type: "string" },
  "sign-with-key": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

/** The `--help` lines of those options. */
export const PAYMENT_OPTION_LINES: readonly string[] = [
  "The payer:",
  "  --key KEY             its private key (0x and 64 hex digits); default the variable BUYER_PRIVATE_KEY",
  "  --key-file FILE       the key read from FILE instead (a key on the command line shows in `ps`)",
  "                        The key is never printed nor logged.",
  "The authorization:",
  "  --valid-after T       unix seconds, or +N (N seconds from now); default 0",
  "  --valid-before T      unix seconds, or +N; default now + max(3600, the offer's maxTimeoutSeconds)",
  "  --nonce HEX           0x and 64 hex digits; default 32 random bytes",
  "  --dialect D           cronos (X-PAYMENT) or x402v2 (PAYMENT-SIGNATURE); default the 402's first offer",
  "                        (Cronos first), or with flags alone x402v2 for an eip155: network, else cronos",
  "On purpose, to meet each refusal (the facilitator's answer in brackets):",
  "  --amount UNITS        another amount than the 402's                  [Invalid amount: UNITS]",
  "  --pay-to ADDRESS      another payee                                  [Recipient does not match payTo address]",
  "  --network N           another network (its chain id and USDC.e)      [Unsupported network: N]",
  "  --asset ADDRESS       another token                                  [Unsupported asset: ADDRESS]",
  "  --domain-version V, --domain-name N, --chain-id N",
  "                        another EIP-712 domain                         [Invalid EIP-3009 signature]",
  "  --sign-with-key KEY   the signature made with another key, `from` left the payer's [Invalid EIP-3009 signature]",
];

export type PaymentValues = ReturnType<typeof parseArgs<{ options: typeof PAYMENT_OPTIONS; allowPositionals: true }>>["values"];

/** Parses `argv` with the payment options and `extra`; a usage error names the option. */
export function parsePaymentArgs<const E extends Record<string, { type: "string" | "boolean"; short?: string; multiple?: boolean }>>(
  argv: readonly string[],
  extra: E,
): { positionals: string[]; values: PaymentValues & ReturnType<typeof parseArgs<{ options: E; allowPositionals: true }>>["values"] } {
  try {
    const { positionals, values } = parseArgs({ args: [...argv], options: { ...PAYMENT_OPTIONS, ...extra }, allowPositionals: true, strict: true });
    return { positionals, values: values as never };
  } catch (error) {
    throw new UsageError(flagProblem(error));
  }
}

const KEY = /^(0x)?[0-9a-fA-F]{64}$/;

/** A private key as an account; a bad one is named by its flag, its value never shown. */
function account(flag: string, raw: string): LocalAccount {
  const key = raw.trim();
  if (!KEY.test(key)) throw new UsageError(`${flag}: must be a private key, 0x and 64 hex digits (the value given is not shown)`);
  return privateKeyToAccount((key.startsWith("0x") ? key : `0x${key}`) as Hex);
}

/** The payer: `--key`, `--key-file`, else BUYER_PRIVATE_KEY. */
export function payerOf(values: PaymentValues, env: NodeJS.ProcessEnv): LocalAccount {
  if (values.key !== undefined && values["key-file"] !== undefined) throw new UsageError("--key and --key-file: give one");
  if (values.key !== undefined) return account("--key", values.key);
  if (values["key-file"] !== undefined) {
    let text: string;
    try {
      text = readFileSync(values["key-file"], "utf8");
    } catch (error) {
      throw new UsageError(`--key-file: cannot read ${values["key-file"]} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
    return account("--key-file", text);
  }
  const fromEnv = env.BUYER_PRIVATE_KEY?.trim();
  if (fromEnv) return account("BUYER_PRIVATE_KEY", fromEnv);
  throw new UsageError("no payer key: pass --key KEY or --key-file FILE, or set BUYER_PRIVATE_KEY (the .x402.env of `start --write-env` has it)");
}

/** `--sign-with-key`: the account whose key makes the signature instead. */
export function signWithOf(values: PaymentValues): LocalAccount | undefined {
  return values["sign-with-key"] === undefined ? undefined : account("--sign-with-key", values["sign-with-key"]);
}

/** A time option: unix seconds, or `+N` seconds from `now`. */
function time(flag: string, value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\+)?(\d{1,12})$/.exec(value.trim());
  if (!match) throw new UsageError(`--${flag}: must be unix seconds or +N (N seconds from now), got "${value.slice(0, 40)}"`);
  return match[1] ? now + Number(match[2]) : Number(match[2]);
}

/** A whole number option. */
function whole(flag: string, value: string | undefined, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,16}$/.test(value.trim()) || Number(value) > max) throw new UsageError(`--${flag}: must be a whole number up to ${max}, got "${value.slice(0, 40)}"`);
  return Number(value.trim());
}

/** An amount in base units. */
export function units(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,78}$/.test(value.trim())) throw new UsageError(`--${flag}: must be a whole number of base units (10000 = 0.01 USDC.e), got "${value.slice(0, 40)}"`);
  return BigInt(value.trim()).toString();
}

/** An address option. */
function address(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^0x[0-9a-fA-F]{40}$/.test(value.trim())) throw new UsageError(`--${flag}: must be a 0x address of 40 hex digits, got "${value.slice(0, 60)}"`);
  return value.trim();
}

/** What the options say of the signing: the window, nonce, dialect, changes, domain. */
export interface SigningChoices {
  dialect?: PaymentDialect;
  changes: PaymentChanges;
  domain: DomainChanges;
  validAfter?: number;
  validBefore?: number;
  nonce?: Hex;
}

/** Reads the signing options (`now`: unix seconds, for `+N`). */
export function signingChoicesOf(values: PaymentValues, now: number): SigningChoices {
  if (values.dialect !== undefined && values.dialect !== "cronos" && values.dialect !== "x402v2") {
    throw new UsageError(`--dialect: must be cronos or x402v2, got "${values.dialect.slice(0, 40)}"`);
  }
  if (values.nonce !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(values.nonce.trim())) throw new UsageError(`--nonce: must be 0x and 64 hex digits, got "${values.nonce.slice(0, 80)}"`);
  const changes: PaymentChanges = {};
  if (values.network !== undefined) changes.network = values.network.trim();
  const payTo = address("pay-to", values["pay-to"]);
  if (payTo !== undefined) changes.payTo = payTo;
  const amount = units("amount", values.amount);
  if (amount !== undefined) changes.amount = amount;
  const asset = address("asset", values.asset);
  if (asset !== undefined) changes.asset = asset;
  const domain: DomainChanges = {};
  if (values["domain-name"] !== undefined) domain.name = values["domain-name"];
  if (values["domain-version"] !== undefined) domain.version = values["domain-version"];
  const chainId = whole("chain-id", values["chain-id"], 2 ** 53 - 1);
  if (chainId !== undefined) domain.chainId = chainId;
  const choices: SigningChoices = { changes, domain };
  if (values.dialect !== undefined) choices.dialect = values.dialect as PaymentDialect;
  const validAfter = time("valid-after", values["valid-after"], now);
  if (validAfter !== undefined) choices.validAfter = validAfter;
  const validBefore = time("valid-before", values["valid-before"], now);
  if (validBefore !== undefined) choices.validBefore = validBefore;
  if (values.nonce !== undefined) choices.nonce = values.nonce.trim() as Hex;
  return choices;
}

/**
 * A 402 answer as given to `sign`: `curl -si` output (status line, headers, body: the `PAYMENT-REQUIRED`
 * header and the JSON body are read), a JSON body alone (Cronos `{paymentRequirements, accepts}`, or an x402
 * v2 `PaymentRequired`), or a `PAYMENT-REQUIRED` value alone (base64).
 */
export function paymentRequiredOf(text: string): PaymentRequiredAnswer {
  const trimmed = text.replace(/^\uFEFF/, "").trim();
  if (/^HTTP\/\d/.test(trimmed)) {
    // The last head (a 100 Continue comes first), then its body.
    let rest = trimmed;
    let head = "";
    while (/^HTTP\/\d/.test(rest)) {
      const end = rest.search(/\r?\n\r?\n/);
      head = end < 0 ? rest : rest.slice(0, end);
      rest = end < 0 ? "" : rest.slice(end).replace(/^\r?\n\r?\n/, "");
    }
    const lines = head.split(/\r?\n/);
    const status = Number(/^HTTP\/[\d.]+ (\d{3})/.exec(lines[0]!)?.[1] ?? 0);
    const wanted = X402V2Header.paymentRequired.toLowerCase();
    const header = lines.slice(1).find((line) => line.slice(0, line.indexOf(":")).trim().toLowerCase() === wanted);
    return { status, paymentRequired: header === undefined ? null : header.slice(header.indexOf(":") + 1).trim(), body: rest };
  }
  if (trimmed.startsWith("{")) return { status: 402, paymentRequired: null, body: trimmed };
  if (!decodeBase64Json(trimmed).ok) throw new PaymentError("malformed_402", "the 402 answer is neither JSON, `curl -si` output nor a PAYMENT-REQUIRED value (base64 JSON)");
  return { status: 402, paymentRequired: trimmed, body: "" };
}
