// `cronos-x402 sign`: the X-PAYMENT (Cronos) or PAYMENT-SIGNATURE (x402 v2) value of a payment, for a suite in
// any language: from a 402 answer (a file, stdin, `curl -si` output) or from flags, signed by the buyer SDK.
import { readFileSync } from "node:fs";
import { readPaymentRequired } from "../buyer/offers.js";
import { offerOf, signedPaymentJson, signPayment, type SignedPayment } from "../buyer/payment-terms.js";
import { PaymentError } from "../buyer/errors.js";
import { UsageError } from "../harness/cli.js";
import type { BackgroundIo } from "./background.js";
import {
  MAX_402_BYTES,
  PAYMENT_OPTION_LINES,
  parsePaymentArgs,
  payerOf,
  signingChoicesOf,
  signWithOf,
  type PaymentValues,
} from "./payment-args.js";

/** The `cronos-x402 sign --help` text. */
export function signUsage(): string {
  return [
    "Usage: cronos-x402 sign --from-402 FILE [options]                       the payment a 402 answer asks for",
    "       cronos-x402 sign --network N --pay-to A --amount UNITS [options]  a payment written out",
    "",
    "Prints the header value to send: X-PAYMENT (Cronos) or PAYMENT-SIGNATURE (x402 v2), base64 JSON.",
    "",
    "  --from-402 FILE       the 402 answer: its JSON body, `curl -si` output (status, headers, body), or its",
    "                        PAYMENT-REQUIRED value; - reads stdin. Flags given with it replace what it says.",
    "  --network N           cronos-testnet, cronos-mainnet, eip155:338, eip155:25",
    "  --pay-to ADDRESS      the payee",
    "  --amount UNITS        base units: 10000 = 0.01 USDC.e",
    "  --asset ADDRESS       the token; default the network's USDC.e",
    "  --json                one JSON line: {header, value, dialect, network, payer, payTo, asset, amount,",
    "                        validAfter, validBefore, nonce, payment} (payment: the header's JSON)",
    "",
    ...PAYMENT_OPTION_LINES,
    "",
    "Exit status: 0 printed; 1 the 402 answer unreadable or offering nothing to sign (one line on stderr);",
    "2 a bad option.",
  ].join("\n");
}

/** Where `sign` reads what it is not given as an argument: stdin (for `--from-402 -`). */
export interface SignInput {
  stdin(): Promise<string>;
}

/** Reads stdin to its end, at most {@link MAX_402_BYTES}. */
export function readStdin(limit = MAX_402_BYTES): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    process.stdin.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        process.stdin.destroy();
        reject(new PaymentError("malformed_402", `the 402 answer on stdin is over ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    process.stdin.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.once("error", reject);
  });
}

/** The 402 answer `--from-402` names: a file (at most {@link MAX_402_BYTES}), or stdin for `-`. */
async function read402(path: string, input: SignInput): Promise<string> {
  if (path === "-") return input.stdin();
  let text: Buffer;
  try {
    text = readFileSync(path);
  } catch (error) {
    throw new UsageError(`--from-402: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
  }
  if (text.length > MAX_402_BYTES) throw new PaymentError("malformed_402", `the 402 answer in ${path} is over ${MAX_402_BYTES} bytes`);
  return text.toString("utf8");
}

/** The payment the options describe, signed. */
export async function signFromArgs(values: PaymentValues & { "from-402"?: string }, env: NodeJS.ProcessEnv, input: SignInput, now = Math.floor(Date.now() / 1000)): Promise<SignedPayment> {
  const choices = signingChoicesOf(values, now);
  const signer = payerOf(values, env);
  const signWith = signWithOf(values);
  const from = values["from-402"];
  if (from === undefined) {
    const missing = (["network", "pay-to", "amount"] as const).filter((flag) => values[flag] === undefined).map((flag) => `--${flag}`);
    if (missing.length > 0) throw new UsageError(`${missing.join(", ")}: needed without --from-402 (or give --from-402 FILE, - for stdin)`);
  }
  const answer = from === undefined ? undefined : readPaymentRequired(await read402(from, input));
  const offer = offerOf({ answer, changes: choices.changes, dialect: choices.dialect });
  return signPayment({ offer, signer, signWith, now, ...choices.signing });
}

/**
 * Runs a payment command: a usage error is its message and exit 2, a payment error one line and exit 1.
 * Nothing it prints comes from a key.
 */
export async function runPaymentCommand(name: string, io: BackgroundIo, work: () => Promise<number>): Promise<number> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`error: ${error.message}\n\nRun \`cronos-x402 ${name} --help\` for the options.\n`);
      return 2;
    }
    if (error instanceof PaymentError) {
      io.stderr(`${name}: ${error.message.split("\n")[0]}\n`);
      return 1;
    }
    throw error;
  }
}

/** `cronos-x402 sign …`: see {@link signUsage}. Returns the exit status. */
export function runSign(argv: readonly string[], io: BackgroundIo, env: NodeJS.ProcessEnv = process.env, input: SignInput = { stdin: () => readStdin() }): Promise<number> {
  return runPaymentCommand("sign", io, async () => {
    const { positionals, values } = parsePaymentArgs(argv, { "from-402": { type: "string" } });
    if (values.help) {
      io.stdout(`${signUsage()}\n`);
      return 0;
    }
    if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]!.slice(0, 40)}" (a 402 answer goes in --from-402 FILE)`);
    const signed = await signFromArgs(values, env, input);
    io.stdout(values.json ? `${JSON.stringify(signedPaymentJson(signed))}\n` : `${signed.value}\n`);
    return 0;
  });
}
