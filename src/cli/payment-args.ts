// What `cronos-x402 sign` and `cronos-x402 pay` share: the payer's key, the validity window and nonce, the
// changes made on purpose. Parsing only: the signing, and the reading of a 402 answer, are the buyer SDK's
// (src/buyer/payment-terms.ts, src/buyer/offers.ts).
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import type { Hex, LocalAccount } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import type { PaymentDialect } from "../buyer/offers.js";
import type { DomainChanges, PaymentChanges } from "../buyer/payment-terms.js";
import { flagProblem, UsageError } from "../harness/cli.js";

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

/** What the options say of the signing: the dialect, the changes, and the window, nonce and domain signed. */
export interface SigningChoices {
  dialect?: PaymentDialect;
  changes: PaymentChanges;
  signing: { domain: DomainChanges; validAfter?: number; validBefore?: number; nonce?: Hex };
}

/** Reads the signing options (`now`: unix seconds, for `+N`). */
export function signingChoicesOf(values: PaymentValues, now: number): SigningChoices {
  if (values.dialect !== undefined && values.dialect !== "cronos" && values.dialect !== "x402v2") {
    throw new UsageError(`--dialect: must be cronos or x402v2, got "${values.dialect.slice(0, 40)}"`);
  }
  if (values.nonce !== undefined && !/^0x[0-9a-fA-F]{64}$/.test(values.nonce.trim())) throw new UsageError(`--nonce: must be 0x and 64 hex digits, got "${values.nonce.slice(0, 80)}"`);
  const changes: PaymentChanges = {
    network: values.network?.trim(),
    payTo: address("pay-to", values["pay-to"]),
    amount: units("amount", values.amount),
    asset: address("asset", values.asset),
  };
  const domain: DomainChanges = { name: values["domain-name"], version: values["domain-version"], chainId: whole("chain-id", values["chain-id"], 2 ** 53 - 1) };
  return {
    dialect: values.dialect as PaymentDialect | undefined,
    changes,
    signing: {
      domain,
      validAfter: time("valid-after", values["valid-after"], now),
      validBefore: time("valid-before", values["valid-before"], now),
      nonce: values.nonce?.trim() as Hex | undefined,
    },
  };
}
