import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import express from "express";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { runPay } from "../../src/cli/pay.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { SettleError } from "../../src/protocol/reasons.js";
import { paymentRequirements, requirePayment, SellerError } from "../../src/seller/index.js";
import { expectSettlementOnChain, tokenBalances } from "../helpers/chain.js";
import { closedPortUrl, listen, type Listening } from "../helpers/http.js";
import { ROOT, spawnInRoot } from "../helpers/processes.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";

// `cronos-x402 pay URL`: a paying curl. The seller is the kit's (both dialects); what it answers, the money, and
// the settlement printed from its header; refusals one line and exit 1, bad options exit 2.

const PRICE = 10_000n;

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `pay` in this process. */
async function pay(argv: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Ran> {
  let stdout = "";
  let stderr = "";
  const code = await runPay(argv, { stdout: (text) => void (stdout += text), stderr: (text) => void (stderr += text) }, env);
  return { code, stdout, stderr };
}

describe("cronos-x402 pay URL: a paying curl (src/cli/pay.ts)", function () {
  this.timeout(180_000);
  let stack: LocalStack;
  let seller: Listening;
  /** What the seller's echo route received, each time: method, a header, the body, whether paid. */
  const received: Array<{ method: string; note: string | undefined; body: string; paid: boolean }> = [];
  const testnet = () => stack.networks["cronos-testnet"]!;
  const key = () => testnet().buyers[0]!.privateKey;
  const buyer = () => privateKeyToAccount(key()).address;
  const balances = () => tokenBalances(testnet().rpcUrl, testnet().token, [buyer(), stack.seller]);
  const requirements = () => paymentRequirements({ network: "cronos-testnet", payTo: stack.seller, amount: PRICE });
  const expectNoKey = (ran: Ran) => expect((ran.stdout + ran.stderr).toLowerCase()).not.to.contain(key().slice(2).toLowerCase());

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 1 });
    const app = express();
    // A quiet logger: the busy facilitator the refusals test makes is logged by the seller otherwise.
    const paid = requirePayment(requirements(), { facilitatorUrl: stack.facilitatorUrl, logger: { error: () => undefined } });
    app.get(["/report", "/weather"], paid, (_req, res) => void res.json({ report: "sunny" }));
    app.use("/echo", express.text({ type: () => true }), (req, _res, next) => {
      received.push({ method: req.method, note: req.get("x-note"), body: typeof req.body === "string" ? req.body : "", paid: req.get("x-payment") !== undefined || req.get("payment-signature") !== undefined });
      next();
    });
    app.post("/echo", paid, (req, res) => void res.json({ method: req.method, note: req.get("x-note"), body: req.body as string }));
    app.get("/free", (_req, res) => void res.type("text/plain").send("free as in beer\n"));
    seller = await listen(app);
  });
  after(async () => {
    await seller?.close();
    await stack?.stop();
  });
  beforeEach(() => void (received.length = 0));

  for (const [dialect, header, responseHeader] of [
    ["cronos", "X-PAYMENT", "x-payment-response"],
    ["x402v2", "PAYMENT-SIGNATURE", "payment-response"],
  ] as const) {
    it(`pays in ${dialect}: the body on stdout, the settlement on stderr; --json: status, headers, body, payment and settlement; the token moved the price by that authorization`, async () => {
      const before = await balances();
      const plain = await pay([`${seller.url}/report`, "--max-amount", String(PRICE), "--key", key(), "--dialect", dialect]);
      expect(plain.code, plain.stderr).to.equal(0);
      expect(JSON.parse(plain.stdout)).to.deep.include({ report: "sunny" });
      expect(plain.stderr).to.match(new RegExp(`^pay: paid 10000 to ${stack.seller} on (cronos-testnet|eip155:338): transaction 0x[0-9a-f]{64}${dialect === "cronos" ? " in block \\d+" : ""}\\n$`));

      const json = await pay([`${seller.url}/report`, "--max-amount", String(PRICE), "--dialect", dialect, "--json"], { BUYER_PRIVATE_KEY: key() });
      expect([json.code, json.stderr]).to.deep.equal([0, ""]);
      const out = JSON.parse(json.stdout) as { status: number; headers: Record<string, string>; body: { report: string }; payment: { header: string; payer: string; nonce: Hex; amount: string }; settlement: Record<string, unknown> };
      expect(out.status).to.equal(200);
      expect(out.body.report).to.equal("sunny");
      expect(out.headers[responseHeader]).to.be.a("string");
      expect([out.payment.header, out.payment.payer, out.payment.amount]).to.deep.equal([header, buyer(), String(PRICE)]);
      if (dialect === "cronos") expect(out.settlement).to.deep.include({ event: "payment.settled", from: buyer(), to: stack.seller, value: String(PRICE) });
      else expect(out.settlement).to.deep.include({ success: true, payer: buyer(), network: "eip155:338" });
      const txHash = (out.settlement.txHash ?? out.settlement.transaction) as Hex;
      await expectSettlementOnChain(stack, "cronos-testnet", txHash, { from: buyer(), to: stack.seller, value: PRICE, nonce: out.payment.nonce });
      expect(await balances()).to.deep.equal([before[0]! - 2n * PRICE, before[1]! + 2n * PRICE]);
      for (const ran of [plain, json]) expectNoKey(ran);
    });
  }

  it("-X, -H, -d: the method, headers and body go with the first request and with the paid one; -i prints the status line and headers", async () => {
    const ran = await pay([`${seller.url}/echo`, "-X", "POST", "-H", "X-Note: hello", "-d", '{"q":1}', "-i", "--max-amount", "10000", "--key", key()]);
    expect(ran.code, ran.stderr).to.equal(0);
    expect(received.map(({ method, note, body, paid }) => [method, note, body, paid])).to.deep.equal([
      ["POST", "hello", '{"q":1}', false],
      ["POST", "hello", '{"q":1}', true],
    ]);
    expect(ran.stdout).to.match(/^HTTP 200 OK\n/);
    expect(ran.stdout).to.match(/\nx-payment-response: [A-Za-z0-9+/=]+\n/);
    expect(ran.stdout, ran.stdout).to.contain('\n\n{"method":"POST","note":"hello","body":"{\\"q\\":1}","payment":{"txHash":"0x');
  });

  it("an answer that is not a 402 is printed as it is, nothing signed: exit 0 for 2xx, 1 otherwise", async () => {
    const before = await balances();
    expect(await pay([`${seller.url}/free`, "--max-amount", "1", "--key", key()])).to.deep.equal({ code: 0, stdout: "free as in beer\n", stderr: "" });
    const missing = await pay([`${seller.url}/nothing-here`, "--max-amount", "1", "--key", key()]);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.match(/^pay: refused: HTTP 404 .*\n$/);
    expect(await balances()).to.deep.equal(before);
  });

  it("refusals are one line on stderr and exit 1: over --max-amount (nothing signed), the facilitator's refusal of a changed payment, the settle failing, the seller unreachable", async () => {
    const before = await balances();
    const over = await pay([`${seller.url}/report`, "--max-amount", "9999", "--key", key()]);
    expect(over).to.deep.equal({ code: 1, stdout: "", stderr: "pay: no acceptable payment requirements in the 402 answer: #0: maxAmountRequired 10000 exceeds --max-amount 9999; #1: maxAmountRequired 10000 exceeds --max-amount 9999; #2: amount 10000 exceeds --max-amount 9999\n" });
    const overByChange = await pay([`${seller.url}/report`, "--max-amount", "10000", "--amount", "20000", "--key", key(), "--dialect", "cronos"]);
    expect(overByChange.stderr).to.equal("pay: no acceptable payment requirements in the 402 answer: #0: --amount 20000 exceeds --max-amount 10000; #1: --amount 20000 exceeds --max-amount 10000\n");

    const cheaper = await pay([`${seller.url}/report`, "--max-amount", "10000", "--amount", "5000", "--key", key()]);
    expect(cheaper.code).to.equal(1);
    expect(cheaper.stderr).to.equal(`pay: refused: HTTP 402 ${SellerError.verificationFailed}: Invalid amount: 5000\n`);
    expect(JSON.parse(cheaper.stdout)).to.deep.include({ error: SellerError.verificationFailed, reason: "Invalid amount: 5000" });

    const fault = await stack.harness.fault({ kind: "balance", address: buyer(), amount: 0n, trigger: "after-verify" });
    try {
      const vanished = await pay([`${seller.url}/report`, "--max-amount", "10000", "--key", key(), "--json"]);
      expect(vanished.code).to.equal(1);
      expect(vanished.stderr).to.equal(`pay: refused: HTTP 402 ${SellerError.settlementFailed}: ${SettleError.insufficientBalance}\n`);
      expect(JSON.parse(vanished.stdout)).to.deep.include({ status: 402 });
      expect(JSON.parse(vanished.stdout).body).to.deep.include({ error: SellerError.settlementFailed, reason: SettleError.insufficientBalance });
    } finally {
      await fault.undo();
    }
    expect(await balances()).to.deep.equal(before);

    const busy = await stack.harness.fault({ kind: "busy", forSeconds: 30 });
    try {
      const ran = await pay([`${seller.url}/report`, "--max-amount", "10000", "--key", key()]);
      expect(ran.code).to.equal(1);
      expect(ran.stderr).to.match(new RegExp(`^pay: refused: HTTP 503 ${SellerError.facilitatorBusy}: ${SellerError.tryLater} \\(Retry-After: (29|30)\\)\\n$`));
    } finally {
      await busy.undo();
    }
    const closed = await closedPortUrl();
    expect(await pay([`${closed}/report`, "--max-amount", "1", "--key", key()])).to.deep.equal({ code: 1, stdout: "", stderr: `pay: cannot reach ${closed}/report: ECONNREFUSED\n` });
  });

  describe("the documents' command lines, as written (npx standing for the kit's CLI from its sources)", () => {
    /** The sh block of `file` whose first line is `first`, run by bash in the clone with the stack's variables. */
    async function runBlock(file: string, first: string, options: string[]) {
      const blocks = [...readFileSync(join(ROOT, file), "utf8").matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
      const block = blocks.find((code) => code.startsWith(first));
      expect(block, `${file}: ${first}`).to.be.a("string");
      const env = { SELLER_URL: seller.url, BUYER_PRIVATE_KEY: key(), BUYER_ADDRESS: buyer(), PAY_TO: stack.seller, HARNESS_URL: stack.harnessUrl };
      const run = spawnInRoot("bash", [...options, "-c", `npx() { shift; node --import tsx src/cli/bin.ts "$@"; }\n${block!}`], env);
      run.child.stdin.end();
      return { code: await run.exited, stdout: run.stdout(), stderr: run.stderr() };
    }

    it("README.md, CI in any language: a payment, the balance gone between verify and settle (refused, one line), every fault undone; the money moved once", async () => {
      const before = await balances();
      const ran = await runBlock("README.md", "# in your suite (any language)", []);
      expect(ran.code, ran.stderr).to.equal(0);
      // pay prints the refused body as it came (no newline added, as curl), then curl prints the undo's answer.
      const [paidLine, faultId, refused, end] = ran.stdout.split("\n");
      expect(JSON.parse(paidLine!)).to.deep.include({ status: 200 });
      expect(faultId).to.match(/^f\d+$/);
      const [refusedBody, undone] = refused!.split(/(?=\{"undone")/);
      expect(JSON.parse(refusedBody!)).to.deep.include({ error: SellerError.settlementFailed, reason: SettleError.insufficientBalance });
      expect(JSON.parse(undone!)).to.deep.equal({ undone: 1 });
      expect(end).to.equal("");
      expect(ran.stderr).to.equal(`pay: refused: HTTP 402 ${SellerError.settlementFailed}: ${SettleError.insufficientBalance}\n`);
      expect(await balances()).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });

    it("docs/harness.md, signing and paying from the command line: every line exits 0 and prints what it says", async () => {
      const ran = await runBlock("docs/harness.md", "# in your suite: SELLER_URL", ["-eo", "pipefail"]);
      expect(ran.code, ran.stderr).to.equal(0);
      expect(ran.stderr).to.match(new RegExp(`^pay: paid 10000 to ${stack.seller} on cronos-testnet: transaction 0x[0-9a-f]{64} in block \\d+\n$`));
      const lines = ran.stdout.replace(/^\{"report":"sunny".*?\}\}/, (body) => `${body}\n`).trim().split("\n");
      expect(JSON.parse(lines[0]!)).to.deep.include({ report: "sunny" });
      expect(JSON.parse(lines[1]!)).to.deep.include({ status: 200 });
      expect(lines[2]).to.match(/^[A-Za-z0-9+/]+={0,2}$/);
      expect(JSON.parse(lines[3]!)).to.deep.include({ header: "X-PAYMENT", payer: buyer(), payTo: stack.seller, amount: "10000" });
      expect(lines).to.have.length(4);
      expectNoKey(ran as Ran);
    });
  });

  it("bad options are exit 2, the option named (the key never shown); as a process too", async () => {
    const cases: Array<[string[], string]> = [
      [[`${seller.url}/report`, "--key", key()], "error: --max-amount UNITS is required"],
      [["--max-amount", "1", "--key", key()], "error: name the URL to pay"],
      [["ftp://example.com/", "--max-amount", "1", "--key", key()], 'error: not an http(s) URL: "ftp://example.com/"'],
      [[`${seller.url}/report`, "--max-amount", "1", "-H", "no colon", "--key", key()], 'error: --header: must be "Name: value", got "no colon"'],
      [[`${seller.url}/report`, "--max-amount", "0.5", "--key", key()], 'error: --max-amount: must be a whole number of base units (10000 = 0.01 USDC.e), got "0.5"'],
      [[`${seller.url}/report`, "--max-amount", "1", "--max-time", "0", "--key", key()], 'error: --max-time: must be whole seconds from 1 to 3600, got "0"'],
      [[`${seller.url}/report`, "--max-amount", "1", "--key", `${key()}0`], "error: --key: must be a private key, 0x and 64 hex digits (the value given is not shown)"],
    ];
    for (const [argv, message] of cases) {
      const ran = await pay(argv);
      expect(ran.code, argv.join(" ")).to.equal(2);
      expect(ran.stderr.startsWith(message), ran.stderr).to.equal(true);
      expectNoKey(ran);
    }
    expect(received).to.deep.equal([]);
    const process = spawnInRoot("node", ["--import", "tsx", "src/cli/bin.ts", "pay", `${seller.url}/report`, "--max-amount", "10000", "--nonsense"], { BUYER_PRIVATE_KEY: key() }, { inheritEnv: false });
    process.child.stdin.end();
    expect(await process.exited).to.equal(2);
    expect(process.stderr()).to.match(/^error: Unknown option '--nonsense'/);
  });
});
