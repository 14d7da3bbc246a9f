import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import express from "express";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { runSign } from "../../src/cli/sign.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { EvmReason } from "../../src/protocol/x402v2.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { expectSettlementOnChain, tokenBalances } from "../helpers/chain.js";
import { decodeBase64Json, listen, postJson, type Listening } from "../helpers/http.js";
import { spawnInRoot } from "../helpers/processes.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";

// `cronos-x402 sign`: the payment header of a 402 answer or of flags, for a suite in any language. Each signed
// value is held to what the token and the facilitator make of it: settled on chain, or refused with its reason.

const PRICE = 10_000n;
const FOREIGN_TOKEN: Address = "0x000000000000000000000000000000000000bEEF";

/** What a command printed, and its status. */
interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `sign` in this process, `stdin` standing for its standard input. */
async function sign(argv: readonly string[], env: NodeJS.ProcessEnv = {}, stdin = ""): Promise<Ran> {
  let stdout = "";
  let stderr = "";
  const code = await runSign(argv, { stdout: (text) => void (stdout += text), stderr: (text) => void (stderr += text) }, env, { stdin: async () => stdin });
  return { code, stdout, stderr };
}

/** Runs the CLI as a process (from the sources), `input` on its stdin. */
async function cli(args: readonly string[], env: NodeJS.ProcessEnv = {}, input?: string | Buffer): Promise<Ran> {
  const run = spawnInRoot("node", ["--import", "tsx", "src/cli/bin.ts", ...args], env, { inheritEnv: false });
  // A command that stops reading (an answer over its limit) closes the pipe: what is left unwritten is dropped.
  run.child.stdin.on("error", () => undefined);
  run.child.stdin.end(input ?? "");
  const code = await run.exited;
  return { code: code as number, stdout: run.stdout(), stderr: run.stderr() };
}

describe("cronos-x402 sign: the X-PAYMENT / PAYMENT-SIGNATURE value of a payment (src/cli/sign.ts)", function () {
  this.timeout(180_000);
  let stack: LocalStack;
  let seller: Listening;
  let dir: string;
  const testnet = () => stack.networks["cronos-testnet"]!;
  const key = () => testnet().buyers[0]!.privateKey;
  const other = () => testnet().buyers[1]!.privateKey;
  const buyer = () => privateKeyToAccount(key()).address;
  const requirements = () => paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE, resource: "/report" });
  /** Every printed character, against the keys: neither may show. */
  const expectNoKey = (ran: Ran) => {
    for (const secret of [key(), other()]) {
      expect(ran.stdout + ran.stderr).not.to.contain(secret.slice(2));
      expect((ran.stdout + ran.stderr).toLowerCase()).not.to.contain(secret.slice(2).toLowerCase());
    }
  };
  /** The seller's 402 as `curl -si` prints it: status line, headers, blank line, body. */
  async function curlSi(): Promise<string> {
    const response = await fetch(`${seller.url}/report`);
    const head = [`HTTP/1.1 ${response.status} Payment Required`, ...[...response.headers.entries()].map(([name, value]) => `${name}: ${value}`)].join("\r\n");
    return `${head}\r\n\r\n${await response.text()}`;
  }
  /** The x402 v2 requirements the seller offers (its PAYMENT-REQUIRED's first offer). */
  async function v2Offer(): Promise<Record<string, unknown>> {
    const response = await fetch(`${seller.url}/report`);
    return (decodeBase64Json(response.headers.get("PAYMENT-REQUIRED")).accepts as Array<Record<string, unknown>>)[0]!;
  }
  /** The facilitator's verify of a signed value against the seller's requirements, in the value's dialect. */
  async function verify(signed: { header: string; value: string }): Promise<Record<string, unknown>> {
    const body =
      signed.header === "X-PAYMENT"
        ? { x402Version: 1, paymentHeader: signed.value, paymentRequirements: requirements() }
        : { x402Version: 2, paymentPayload: decodeBase64Json(signed.value), paymentRequirements: await v2Offer() };
    const { status, json } = await postJson(`${stack.facilitatorUrl}/v2/x402/verify`, body, { "X402-Version": String(body.x402Version) });
    expect(status, JSON.stringify(json)).to.equal(200);
    return json as Record<string, unknown>;
  }
  /** `sign --json` as JSON. */
  const signed = async (argv: readonly string[], env: NodeJS.ProcessEnv = {}, stdin = "") => {
    const ran = await sign([...argv, "--json"], env, stdin);
    expect(ran.code, ran.stderr).to.equal(0);
    expect(ran.stderr).to.equal("");
    expectNoKey(ran);
    return JSON.parse(ran.stdout) as { header: string; value: string; dialect: string; payer: Address; nonce: Hex; amount: string; payTo: string; validBefore: number; payment: Record<string, any> };
  };

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 2 });
    const app = express();
    app.get("/report", requirePayment(requirements(), { facilitatorUrl: stack.facilitatorUrl }), (_req, res) => void res.json({ report: "sunny" }));
    seller = await listen(app);
    dir = mkdtempSync(join(tmpdir(), "x402-sign-"));
  });
  after(async () => {
    await seller?.close();
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [dialect, flags, header] of [
    ["cronos", ["--network", "cronos-testnet"], "X-PAYMENT"],
    ["x402v2", ["--network", "eip155:338"], "PAYMENT-SIGNATURE"],
  ] as const) {
    it(`from flags, ${dialect}: the value the facilitator settles; the token moves the amount from the payer to the payee by that very authorization`, async () => {
      const before = await tokenBalances(testnet().rpcUrl, testnet().token, [buyer(), stack.seller]);
      const payment = await signed([...flags, "--pay-to", stack.seller, "--amount", String(PRICE), "--key", key()]);
      expect([payment.header, payment.dialect, payment.payer, payment.amount]).to.deep.equal([header, dialect, buyer(), String(PRICE)]);
      expect(decodeBase64Json(payment.value)).to.deep.equal(payment.payment);
      const settleBody =
        dialect === "cronos"
          ? { x402Version: 1, paymentHeader: payment.value, paymentRequirements: requirements() }
          : { x402Version: 2, paymentPayload: payment.payment, paymentRequirements: await v2Offer() };
      const { status, json } = await postJson(`${stack.facilitatorUrl}/v2/x402/settle`, settleBody, { "X402-Version": String(settleBody.x402Version) });
      expect(status, JSON.stringify(json)).to.equal(200);
      const txHash = (json.txHash ?? json.transaction) as Hex;
      await expectSettlementOnChain(stack, "cronos-testnet", txHash, { from: buyer(), to: stack.seller, value: PRICE, nonce: payment.nonce });
      expect(await tokenBalances(testnet().rpcUrl, testnet().token, [buyer(), stack.seller])).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });
  }

  it("from a 402 answer: its JSON body in a file, `curl -si` output on stdin, its PAYMENT-REQUIRED value; the key from BUYER_PRIVATE_KEY; the terms are the 402's", async () => {
    const response = await fetch(`${seller.url}/report`);
    const paymentRequired = response.headers.get("PAYMENT-REQUIRED")!;
    writeFileSync(join(dir, "402.json"), await response.text());
    const env = { BUYER_PRIVATE_KEY: key() };
    const fromFile = await signed(["--from-402", join(dir, "402.json")], env);
    expect(fromFile.payment).to.deep.include({ x402Version: 1, scheme: "exact", network: "cronos-testnet" });
    expect(fromFile.payment.payload).to.deep.include({ from: buyer(), to: stack.seller, value: String(PRICE), asset: testnet().token, validAfter: 0 });
    expect(await verify(fromFile)).to.deep.equal({ isValid: true, invalidReason: null });

    const fromStdin = await signed(["--from-402", "-"], env, await curlSi());
    expect(fromStdin.header).to.equal("X-PAYMENT");
    expect(await verify(fromStdin)).to.deep.equal({ isValid: true, invalidReason: null });
    const v2FromStdin = await signed(["--from-402", "-", "--dialect", "x402v2"], env, await curlSi());
    expect(v2FromStdin.header).to.equal("PAYMENT-SIGNATURE");
    expect(v2FromStdin.payment.accepted).to.deep.equal(await v2Offer());
    expect(await verify(v2FromStdin)).to.deep.equal({ isValid: true, payer: buyer() });

    const fromHeader = await signed(["--from-402", "-"], env, paymentRequired);
    expect(fromHeader.header).to.equal("PAYMENT-SIGNATURE");
    expect(fromHeader.payment.resource).to.deep.equal({ url: `${seller.url}/report`, description: "X402 payment request", mimeType: "application/json" });
    expect(await verify(fromHeader)).to.deep.equal({ isValid: true, payer: buyer() });
  });

  it("--valid-after, --valid-before (unix seconds or +N), --nonce: signed as given", async () => {
    const nonce = `0x${"ab".repeat(32)}` as Hex;
    // "+600" is 600 s after the clock when it signs: between the command's start and its end, however long it took.
    const started = Math.floor(Date.now() / 1000);
    const payment = await signed(["--network", "cronos-testnet", "--pay-to", stack.seller, "--amount", "1", "--key", key(), "--valid-after", "5", "--valid-before", "+600", "--nonce", nonce]);
    const ended = Math.ceil(Date.now() / 1000);
    expect(payment.payment.payload).to.deep.include({ validAfter: 5, nonce });
    expect(payment.validBefore).to.be.within(started + 600, ended + 600);
    const absolute = await signed(["--network", "cronos-testnet", "--pay-to", stack.seller, "--amount", "1", "--key", key(), "--valid-before", "2000000000"]);
    expect(absolute.payment.payload.validBefore).to.equal(2_000_000_000);
  });

  describe("on purpose: each change makes the facilitator refuse the payment with its reason (the seller's 402 read from a file)", () => {
    const refusals: Array<[string, () => string[], string, string]> = [
      ["--amount 5000 (another amount)", () => ["--amount", "5000"], VerifyReason.invalidAmount("5000"), EvmReason.valueMismatch],
      ["--pay-to (another payee)", () => ["--pay-to", privateKeyToAccount(other()).address], VerifyReason.recipientMismatch, EvmReason.recipientMismatch],
      ["--network cronos-mainnet (another network)", () => ["--network", "cronos-mainnet"], VerifyReason.unsupportedNetwork("cronos-mainnet"), EvmReason.networkMismatch],
      ["--asset (another token)", () => ["--asset", FOREIGN_TOKEN], VerifyReason.unsupportedAsset(FOREIGN_TOKEN), EvmReason.eip3009NotSupported],
      ["--domain-version 9 (another EIP-712 domain)", () => ["--domain-version", "9"], VerifyReason.invalidSignature, EvmReason.invalidSignature],
      ["--chain-id 1 (another chain in the domain)", () => ["--chain-id", "1"], VerifyReason.invalidSignature, EvmReason.invalidSignature],
      ["--sign-with-key (a signature by another key)", () => ["--sign-with-key", other()], VerifyReason.invalidSignature, EvmReason.invalidSignature],
      ["--valid-after +3600 (not valid yet)", () => ["--valid-after", "+3600"], VerifyReason.notYetValid, EvmReason.validAfter],
      ["--valid-before in the past (expired)", () => ["--valid-before", "1000"], VerifyReason.expired, EvmReason.validBefore],
    ];
    for (const [what, flags, text, code] of refusals) {
      it(`${what}: "${text}" (x402 v2: ${code})`, async () => {
        const response = await fetch(`${seller.url}/report`);
        const file = join(dir, "402.txt");
        writeFileSync(file, `HTTP/1.1 402 Payment Required\r\npayment-required: ${response.headers.get("PAYMENT-REQUIRED")}\r\ncontent-type: application/json\r\n\r\n${await response.text()}`);
        const cronos = await signed(["--from-402", file, "--key", key(), ...flags()]);
        expect(await verify(cronos)).to.deep.equal({ isValid: false, invalidReason: text });
        const v2 = await signed(["--from-402", file, "--dialect", "x402v2", "--key", key(), ...flags()]);
        expect(await verify(v2)).to.deep.include({ isValid: false, invalidReason: code, invalidMessage: text });
      });
    }
  });

  describe("refusals and bad options", () => {
    it("a bad option is exit 2 with the option named; a bad key is named, never shown", async () => {
      const base = ["--network", "cronos-testnet", "--pay-to", stack.seller, "--amount", "1"];
      const cases: Array<[string[], string]> = [
        [[...base, "--key", key(), "--frobnicate"], "error: Unknown option '--frobnicate'"],
        [[...base], "error: no payer key: pass --key KEY or --key-file FILE, or set BUYER_PRIVATE_KEY"],
        [[...base, "--key", key().slice(0, 60)], "error: --key: must be a private key, 0x and 64 hex digits (the value given is not shown)"],
        [[...base, "--key", key(), "--sign-with-key", `${other()}ff`], "error: --sign-with-key: must be a private key, 0x and 64 hex digits (the value given is not shown)"],
        [["--network", "cronos-testnet", "--key", key()], "error: --pay-to, --amount: needed without --from-402"],
        [[...base, "--key", key(), "--amount", "1.5"], 'error: --amount: must be a whole number of base units (10000 = 0.01 USDC.e), got "1.5"'],
        [[...base, "--key", key(), "--valid-before", "tomorrow"], 'error: --valid-before: must be unix seconds or +N (N seconds from now), got "tomorrow"'],
        [[...base, "--key", key(), "--nonce", "0x12"], 'error: --nonce: must be 0x and 64 hex digits, got "0x12"'],
        [[...base, "--key", key(), "--dialect", "v3"], 'error: --dialect: must be cronos or x402v2, got "v3"'],
        [[...base, "--key", key(), "--from-402", join(dir, "absent.json")], "error: --from-402: cannot read"],
        [[...base, "--key", key(), "extra"], 'error: unexpected argument "extra"'],
      ];
      for (const [argv, message] of cases) {
        const ran = await sign(argv);
        expect(ran.code, argv.join(" ")).to.equal(2);
        expect(ran.stdout).to.equal("");
        expect(ran.stderr.startsWith(message), ran.stderr).to.equal(true);
        expectNoKey(ran);
      }
    });

    it("a 402 answer that is unreadable or offers nothing to sign is one line on stderr and exit 1", async () => {
      const env = { BUYER_PRIVATE_KEY: key() };
      const cases: Array<[string, string[], string]> = [
        ["not json at all", [], "sign: the 402 answer is neither JSON, `curl -si` output nor a PAYMENT-REQUIRED value (base64 JSON)\n"],
        ['{"error":"Payment Required"}', [], "sign: the 402 answer holds no payment requirements\n"],
        [JSON.stringify({ paymentRequirements: { ...requirements(), scheme: "upto" } }), [], 'sign: no acceptable payment requirements in the 402 answer: #0: scheme "upto" is not "exact"\n'],
        [JSON.stringify({ paymentRequirements: requirements() }), ["--dialect", "x402v2"], "sign: the 402 answer offers nothing in x402v2\n"],
      ];
      for (const [input, flags, line] of cases) {
        const ran = await sign(["--from-402", "-", ...flags], env, input);
        expect(ran.code, input).to.equal(1);
        expect(ran.stdout).to.equal("");
        expect(ran.stderr.split("\n")).to.have.length(2);
        expect(ran.stderr.startsWith(line), ran.stderr).to.equal(true);
      }
    });

    it("as a process: stdin read, exit 0 / 1 / 2, an answer over 1 MiB on stdin refused, the key in no output", async () => {
      const env = { BUYER_PRIVATE_KEY: key() };
      const ok = await cli(["sign", "--from-402", "-"], env, await curlSi());
      expect(ok.code, ok.stderr).to.equal(0);
      expect(ok.stdout).to.match(/^[A-Za-z0-9+/]+={0,2}\n$/);
      expect(await verify({ header: "X-PAYMENT", value: ok.stdout.trim() })).to.deep.equal({ isValid: true, invalidReason: null });
      const refused = await cli(["sign", "--from-402", "-"], env, "{}");
      expect([refused.code, refused.stdout, refused.stderr]).to.deep.equal([1, "", "sign: the 402 answer holds no payment requirements\n"]);
      const flooded = await cli(["sign", "--from-402", "-"], env, Buffer.alloc(2 * 1024 * 1024, "x"));
      expect([flooded.code, flooded.stdout, flooded.stderr]).to.deep.equal([1, "", "sign: the 402 answer on stdin is over 1048576 bytes\n"]);
      const bad = await cli(["sign", "--from-402"], env);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.match(/^error: Option '--from-402 <value>' argument missing/);
      const help = await cli(["sign", "--help"], env);
      expect(help.code).to.equal(0);
      expect(help.stdout).to.match(/^Usage: cronos-x402 sign --from-402 FILE/);
      for (const ran of [ok, refused, flooded, bad, help]) expectNoKey(ran);
    });
  });

  it("mainnet from flags: signed over chain 25 and its USDC.e domain (version 2), as the vectors say", async () => {
    const payment = await signed(["--network", "cronos-mainnet", "--pay-to", stack.seller, "--amount", "1", "--key", key()]);
    expect(payment.payment.payload.asset).to.equal(NETWORKS["cronos-mainnet"].token);
    const v2 = await signed(["--network", "eip155:25", "--pay-to", stack.seller, "--amount", "1", "--key", key()]);
    expect(v2.payment.accepted.extra).to.deep.equal({ name: "Bridged USDC (Stargate)", version: "2" });
  });
});
