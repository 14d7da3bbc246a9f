// `cronos-x402 pay URL`: a paying curl. The request is sent; a 402 is read, its offer checked against
// --max-amount and signed (the buyer SDK's signer, in the dialect offered), the request sent again with the
// payment; the answer is printed with the settlement its X-PAYMENT-RESPONSE / PAYMENT-RESPONSE carries.
import { readFileSync } from "node:fs";
import { PaymentError } from "../buyer/errors.js";
import { chooseOffer, PAYMENT_DIALECTS } from "../buyer/offers.js";
import { changeOffer, signedPaymentJson, signPayment, type SignedPayment } from "../buyer/payment-terms.js";
import { decodePaymentResponse, decodeV2PaymentResponse } from "../buyer/sign.js";
import { UsageError } from "../harness/cli.js";
import { NETWORKS } from "../protocol/networks.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import { networkOfAnyForm, X402V2Header } from "../protocol/x402v2.js";
import type { BackgroundIo } from "./background.js";
import { MAX_402_BYTES, PAYMENT_OPTION_LINES, parsePaymentArgs, payerOf, signingChoicesOf, signWithOf, units } from "./payment-args.js";
import { runPaymentCommand } from "./sign.js";

/** The most of an answer `pay` holds to print it: 16 MiB. */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** Each request's time limit unless --max-time says otherwise. */
const DEFAULT_MAX_TIME_SECONDS = 60;

/** The `cronos-x402 pay --help` text. */
export function payUsage(): string {
  return [
    "Usage: cronos-x402 pay URL --max-amount UNITS [options]",
    "",
    "Sends the request; on a 402, signs the payment it asks for (at most --max-amount) and sends the request",
    "again with it (X-PAYMENT or PAYMENT-SIGNATURE, as the seller offers). Prints the answer's body on stdout",
    "and the settlement (from X-PAYMENT-RESPONSE / PAYMENT-RESPONSE) on stderr.",
    "",
    "  --max-amount UNITS    the most this request may cost, in base units (10000 = 0.01 USDC.e); required",
    "  -X, --request METHOD  default GET, or POST with --data",
    "  -H, --header 'N: V'   a request header (repeatable)",
    "  -d, --data DATA       the request body; @FILE reads it from FILE",
    "  --max-time SECONDS    each request's time limit; default 60",
    "  -i, --include         the answer's status line and headers before its body",
    "  --json                one JSON line: {status, headers, body, payment, settlement}, also when refused",
    "",
    ...PAYMENT_OPTION_LINES,
    "  (--asset also allows a token other than the network's USDC.e.)",
    "",
    "Exit status: 0 the answer is 2xx; 1 refused (the 402 offers nothing within --max-amount, the paid request",
    "answered otherwise, the URL unreachable: one line on stderr); 2 a bad option.",
  ].join("\n");
}

const PAY_OPTIONS = {
  "max-amount": { type: "string" },
  request: { type: "string", short: "X" },
  header: { type: "string", short: "H", multiple: true },
  data: { type: "string", short: "d" },
  "max-time": { type: "string" },
  include: { type: "boolean", short: "i" },
} as const;

/** A request header option, `Name: value`. */
function headerOf(line: string): [string, string] {
  const colon = line.indexOf(":");
  const name = colon < 0 ? "" : line.slice(0, colon).trim();
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) throw new UsageError(`--header: must be "Name: value", got "${line.slice(0, 60)}"`);
  return [name, line.slice(colon + 1).trim()];
}

/** An answer's body, at most `limit` bytes. */
async function bodyOf(response: Response, limit: number): Promise<string> {
  const reader = response.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.length;
    if (size > limit) {
      await reader.cancel();
      throw new PaymentError("request_failed", `the answer of ${response.url} is over ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** The settlement an answer carries, decoded (or what is wrong with it). */
function settlementOf(response: Response): Record<string, unknown> | undefined {
  const cronos = response.headers.get("X-PAYMENT-RESPONSE");
  const v2 = response.headers.get(X402V2Header.paymentResponse);
  try {
    if (cronos !== null) return { ...decodePaymentResponse(cronos) };
    if (v2 !== null) return { ...decodeV2PaymentResponse(v2) };
  } catch (error) {
    return { unreadable: (error as Error).message };
  }
  return undefined;
}

/** The one line saying what a refusal answer said: its status, `error`, `reason` (or `details`), Retry-After. */
function refusalLine(status: number, text: string, retryAfter: string | null): string {
  let said = text.trim().replace(/\s+/g, " ").slice(0, 300);
  try {
    const body = JSON.parse(text) as { error?: unknown; reason?: unknown; details?: unknown };
    if (typeof body.error === "string") said = [body.error, typeof body.reason === "string" ? body.reason : typeof body.details === "string" ? body.details : ""].filter(Boolean).join(": ");
  } catch {
    // not JSON: the text as it is
  }
  return `HTTP ${status}${said ? ` ${said}` : ""}${retryAfter ? ` (Retry-After: ${retryAfter})` : ""}`;
}

/** `cronos-x402 pay URL …`: see {@link payUsage}. Returns the exit status. */
export function runPay(argv: readonly string[], io: BackgroundIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  return runPaymentCommand("pay", io, async () => {
    const { positionals, values } = parsePaymentArgs(argv, PAY_OPTIONS);
    if (values.help) {
      io.stdout(`${payUsage()}\n`);
      return 0;
    }
    if (positionals.length !== 1) throw new UsageError(positionals.length === 0 ? "name the URL to pay" : `one URL, got "${positionals[1]!.slice(0, 60)}" too`);
    let url: URL;
    try {
      url = new URL(positionals[0]!);
    } catch {
      throw new UsageError(`not a URL: "${positionals[0]!.slice(0, 80)}"`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`not an http(s) URL: "${url.href.slice(0, 80)}"`);
    const maxAmount = units("max-amount", values["max-amount"]);
    if (maxAmount === undefined) throw new UsageError("--max-amount UNITS is required: the most this request may cost (10000 = 0.01 USDC.e)");
    const maxTime = values["max-time"] === undefined ? DEFAULT_MAX_TIME_SECONDS : Number(values["max-time"]);
    if (!Number.isInteger(maxTime) || maxTime < 1 || maxTime > 3_600) throw new UsageError(`--max-time: must be whole seconds from 1 to 3600, got "${String(values["max-time"]).slice(0, 40)}"`);
    const now = Math.floor(Date.now() / 1000);
    const choices = signingChoicesOf(values, now);
    const signer = payerOf(values, env);
    const signWith = signWithOf(values);
    const headers = (values.header ?? []).map(headerOf);
    let body: string | undefined = values.data;
    if (body?.startsWith("@")) {
      try {
        body = readFileSync(body.slice(1), "utf8");
      } catch (error) {
        throw new UsageError(`--data: cannot read ${body.slice(1)} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
      }
    }
    const method = (values.request ?? (body === undefined ? "GET" : "POST")).toUpperCase();

    const send = async (payment?: SignedPayment): Promise<Response> => {
      const sent = new Headers(headers);
      if (payment) sent.set(payment.header, payment.value);
      try {
        return await fetch(url, { method, headers: sent, ...(body !== undefined ? { body } : {}), signal: AbortSignal.timeout(maxTime * 1000) });
      } catch (error) {
        const cause = (error as { cause?: { code?: string } }).cause;
        const why = (error as Error).name === "TimeoutError" ? `no answer within ${maxTime} s` : (cause?.code ?? (error as Error).message);
        throw new PaymentError("request_failed", `cannot reach ${url.href}: ${why}`);
      }
    };

    let response = await send();
    let payment: SignedPayment | undefined;
    if (response.status === 402) {
      const answer = { status: 402, paymentRequired: response.headers.get(X402V2Header.paymentRequired), body: await bodyOf(response, MAX_402_BYTES) };
      const { changes } = choices;
      const offer = chooseOffer(
        answer,
        (terms) => {
          if (terms.scheme !== EXACT_SCHEME) return `scheme "${terms.scheme}" is not "${EXACT_SCHEME}"`;
          const network = networkOfAnyForm(changes.network ?? terms.network);
          if (!network) return `network "${terms.network}" is not a Cronos network`;
          const allowed = [NETWORKS[network].token.toLowerCase(), ...(changes.asset ? [changes.asset.toLowerCase()] : [])];
          if (!allowed.includes((changes.asset ?? terms.asset).toLowerCase())) return `asset ${terms.asset} is not USDC.e on ${terms.network} (--asset allows it)`;
          const amount = changes.amount ?? terms.amount;
          if (BigInt(amount) > BigInt(maxAmount)) return `${changes.amount ? "--amount" : terms.amountName} ${amount} exceeds --max-amount ${maxAmount}`;
          return undefined;
        },
        choices.dialect ? [choices.dialect] : PAYMENT_DIALECTS,
      );
      payment = await signPayment({ offer: changeOffer(offer, changes), signer, signWith, now, ...choices.signing });
      response = await send(payment);
    }
    const text = await bodyOf(response, MAX_ANSWER_BYTES);
    const settlement = settlementOf(response);
    const ok = response.status >= 200 && response.status < 300;
    if (values.json) {
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // a body that is not JSON stays text
      }
      const answerHeaders = Object.fromEntries(response.headers.entries());
      io.stdout(`${JSON.stringify({ status: response.status, headers: answerHeaders, body: parsed, ...(payment ? { payment: signedPaymentJson(payment) } : {}), ...(settlement ? { settlement } : {}) })}\n`);
    } else {
      if (values.include) io.stdout(`HTTP ${response.status} ${response.statusText}\n${[...response.headers.entries()].map(([name, value]) => `${name}: ${value}\n`).join("")}\n`);
      io.stdout(text);
    }
    if (!ok) {
      io.stderr(`pay: refused: ${refusalLine(response.status, text, response.headers.get("retry-after"))}\n`);
      return 1;
    }
    if (settlement && !values.json) {
      const { transaction, txHash, blockNumber, network } = settlement as { transaction?: string; txHash?: string; blockNumber?: number; network?: string };
      io.stderr(`pay: paid ${payment?.amount ?? "?"} to ${payment?.payTo ?? "?"} on ${network ?? payment?.network}: transaction ${txHash ?? transaction}${blockNumber !== undefined ? ` in block ${blockNumber}` : ""}\n`);
    }
    return 0;
  });
}
