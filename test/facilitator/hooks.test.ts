import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import request from "supertest";
import type { FacilitatorHooks, HookName } from "../../src/index.js";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { createFacilitator } from "../../src/facilitator/server.js";
import { StartupError } from "../../src/facilitator/startup-error.js";
import { allowlistHooks } from "../../scripts/snippets/facilitator-hooks.js";
import { makePayment, openFacilitator, recordingLogger, TEST_ENV, v2BodyOf } from "../helpers/facilitator.js";
import { ROOT } from "../helpers/processes.js";
import { rejection } from "../helpers/reject.js";

// Issue 40: lifecycle hooks as a public API. Each hook, on a real chain through the real app: the order in which
// the hooks and the answer come, a before-hook's refusal, a hook that throws, and one that never answers.

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

/** A call of a hook: its name, and what it was given (the abort signal left out). */
interface Call {
  hook: HookName;
  seen: Record<string, unknown>;
}

/** Hooks that record each call into `calls`, with `override` taking the place of some. */
function recording(calls: Call[], override: Partial<FacilitatorHooks> = {}): FacilitatorHooks {
  const names: HookName[] = ["onBeforeVerify", "onAfterVerify", "onVerifyFailure", "onBeforeSettle", "onAfterSettle", "onSettleFailure"];
  const hooks: FacilitatorHooks = { timeoutMs: override.timeoutMs ?? 1_000 };
  for (const name of names) {
    const replacement = override[name] as ((request: { signal: AbortSignal }) => unknown) | undefined;
    (hooks as Record<string, unknown>)[name] = (request: { signal: AbortSignal }) => {
      const { signal: _signal, ...seen } = request;
      calls.push({ hook: name, seen });
      return replacement?.(request);
    };
  }
  return hooks;
}

/** A hook that never answers; `aborted` records that its signal told it its time was up. */
function hanging(aborted: HookName[], name: HookName) {
  return ({ signal }: { signal: AbortSignal }) =>
    new Promise<never>(() => {
      signal.addEventListener("abort", () => aborted.push(name));
    });
}

const thrower = (name: HookName) => () => {
  throw new Error(`${name} broke`);
};

async function post(opened: Opened, route: "verify" | "settle", body: object) {
  const answer = await request(opened.app).post(`/v2/x402/${route}`).set("X-Request-Id", `req-${route}`).send(body);
  return { status: answer.status, body: answer.body as Record<string, unknown>, retryAfter: answer.get("Retry-After") };
}

async function paid(opened: Opened, made: Awaited<ReturnType<typeof makePayment>>): Promise<{ payee: bigint; used: boolean }> {
  const payee = await opened.chain.contract.read.balanceOf([made.payTo]);
  const used = await opened.chain.contract.read.authorizationState([made.payer.address, made.message.nonce]);
  return { payee, used };
}

describe("lifecycle hooks: typed, bounded, and unable to lose a settlement", () => {
  it("order: before, then after (valid, settled) or failure (refused), each awaited before the answer, with the request it is about", async () => {
    const calls: Call[] = [];
    const opened = await openFacilitator("cronos-testnet", {}, { hooks: recording(calls) });
    const made = await makePayment(opened.chain);
    const { from, to, value, nonce } = made.message;
    const payeeBefore = await opened.chain.contract.read.balanceOf([made.payTo]);

    expect((await post(opened, "verify", made.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
    calls.push({ hook: "answer" as HookName, seen: {} });
    const settled = await post(opened, "settle", made.body);
    expect(settled.body.event).to.equal("payment.settled");
    calls.push({ hook: "answer" as HookName, seen: {} });
    const replay = await post(opened, "settle", made.body);
    expect(replay.body.error).to.equal("Authorization already used");

    expect(calls.map((call) => call.hook)).to.deep.equal(["onBeforeVerify", "onAfterVerify", "answer", "onBeforeSettle", "onAfterSettle", "answer", "onSettleFailure"]);
    const requirements = { scheme: "exact", network: "cronos-testnet", payTo: made.payTo, asset: opened.chain.token, amount: "1000000" };
    const authorization = { from, to, value: "1000000", validAfter: 0n, validBefore: made.message.validBefore, nonce, signature: made.signature };
    const verifyRequest = { route: "verify", requestId: "req-verify", dialect: "cronos", network: "cronos-testnet", requirements, authorization };
    expect(calls[0]!.seen).to.deep.equal(verifyRequest);
    expect(calls[1]!.seen).to.deep.equal({ ...verifyRequest, result: { payer: from, network: "cronos-testnet", repeat: false } });
    const settleRequest = { ...verifyRequest, route: "settle", requestId: "req-settle" };
    expect(calls[3]!.seen).to.deep.equal(settleRequest);
    const receipt = await opened.chain.publicClient.getTransactionReceipt({ hash: settled.body.txHash as `0x${string}` });
    const block = await opened.chain.publicClient.getBlock({ blockNumber: receipt.blockNumber });
    expect(calls[4]!.seen).to.deep.equal({
      ...settleRequest,
      result: { txHash: settled.body.txHash, payer: from, payee: to, value, blockNumber: receipt.blockNumber, timestamp: new Date(Number(block.timestamp) * 1000).toISOString(), repeat: false },
    });
    expect(calls[6]!.seen).to.deep.equal({ ...settleRequest, failure: { kind: "refused", code: "alreadyUsed", reason: "Authorization already used", txHash: settled.body.txHash } });
    expect(await paid(opened, made)).to.deep.equal({ payee: payeeBefore + 1_000_000n, used: true });

    // A payment refused by the checks: the before-hook of verify runs (it sees the payment as sent), settle's does not (nothing proven).
    calls.length = 0;
    const stranger = await makePayment(opened.chain, { signedValue: 2n });
    expect((await post(opened, "verify", stranger.body)).body).to.deep.equal({ isValid: false, invalidReason: "Invalid EIP-3009 signature" });
    expect((await post(opened, "settle", stranger.body)).body.error).to.equal("Invalid signature");
    expect(calls.map(({ hook, seen }) => [hook, seen.failure])).to.deep.equal([
      ["onBeforeVerify", undefined],
      ["onVerifyFailure", { kind: "refused", code: "signature", reason: "Invalid EIP-3009 signature" }],
      ["onSettleFailure", { kind: "refused", code: "invalidSignature", reason: "Invalid signature" }],
    ]);
  });

  it("abort: onBeforeVerify refuses before any check, in each dialect's words (a control character made a space)", async () => {
    const calls: Call[] = [];
    const opened = await openFacilitator("cronos-testnet", {}, { hooks: recording(calls, { onBeforeVerify: () => ({ abort: true, reason: "payer\nnot on the allowlist" }) }) });
    const made = await makePayment(opened.chain);
    expect(await post(opened, "verify", made.body)).to.deep.include({ status: 200, body: { isValid: false, invalidReason: "Payment refused: payer not on the allowlist" } });
    expect((await post(opened, "verify", v2BodyOf(made))).body).to.deep.equal({
      isValid: false,
      invalidReason: "payment_refused",
      invalidMessage: "Payment refused: payer not on the allowlist",
      payer: made.payer.address,
    });
    // Before any check: a payment the first check would refuse (another scheme) is answered with the hook's refusal.
    const upto = { ...made.body, paymentRequirements: { ...made.body.paymentRequirements, scheme: "upto" } };
    expect((await post(opened, "verify", upto)).body).to.deep.equal({ isValid: false, invalidReason: "Payment refused: payer not on the allowlist" });
    expect(calls.filter((call) => call.hook === "onVerifyFailure").map((call) => call.seen.failure)).to.deep.equal(
      Array(3).fill({ kind: "refused", code: "refused", reason: "Payment refused: payer not on the allowlist" }),
    );
    expect(calls.map((call) => call.hook)).to.deep.equal(Array(3).fill(["onBeforeVerify", "onVerifyFailure"]).flat());
  });

  it("abort: onBeforeSettle refuses a proven payment before it is claimed: nothing sent, nothing recorded, and it settles once allowed", async () => {
    const audit: string[] = [];
    const allowed = new Set<string>();
    const opened = await openFacilitator("cronos-testnet", {}, { hooks: allowlistHooks(allowed, (line) => audit.push(line)) });
    const made = await makePayment(opened.chain);
    const before = await paid(opened, made);
    const refused = await post(opened, "settle", made.body);
    expect(refused.status).to.equal(200);
    expect(refused.body).to.deep.include({ event: "payment.failed", error: "Payment refused: payer not on the allowlist" });
    expect(refused.body.txHash).to.equal(undefined);
    expect(await paid(opened, made)).to.deep.equal(before);
    const key = { chainId: opened.chain.info.chainId, token: opened.chain.token, authorizer: made.payer.address, nonce: made.message.nonce };
    expect(await opened.facilitator.coordination.ledger.get(key)).to.equal(undefined);
    expect(audit).to.deep.equal(["req-settle not settled: Payment refused: payer not on the allowlist"]);

    // The payer allowed now: the same authorization settles, once (nothing was claimed for it).
    allowed.add(made.payer.address.toLowerCase());
    const settled = await post(opened, "settle", made.body);
    expect(settled.body.event).to.equal("payment.settled");
    expect(await paid(opened, made)).to.deep.equal({ payee: before.payee + 1_000_000n, used: true });
    expect(await opened.facilitator.coordination.ledger.get(key)).to.deep.include({ status: "settled", txHash: settled.body.txHash });
    expect(audit.at(-1)).to.equal(`req-settle settled 1000000 from ${made.payer.address} in ${String(settled.body.txHash)}`);
  });

  it("throwing: a before-hook that throws is a fault (verify 500, settle 503 with Retry-After: nothing sent); an after- or failure hook that throws is logged and the answer stands", async () => {
    const calls: Call[] = [];
    const { logger, lines } = recordingLogger();
    const hooks = recording(calls, { onBeforeVerify: thrower("onBeforeVerify"), onBeforeSettle: thrower("onBeforeSettle") });
    const opened = await openFacilitator("cronos-testnet", {}, { hooks, logger });
    const made = await makePayment(opened.chain);
    const before = await paid(opened, made);

    const verify = await post(opened, "verify", made.body);
    const threw = "Service unavailable: the operator's onBeforeVerify hook failed; nothing was sent";
    expect(verify).to.deep.include({ status: 500, body: { isValid: false, invalidReason: threw, error: threw } });
    const settle = await post(opened, "settle", made.body);
    expect(settle.status).to.equal(503);
    expect(settle.retryAfter).to.equal("2");
    expect(settle.body.error).to.equal("Service unavailable: the operator's onBeforeSettle hook failed; nothing was sent");
    expect(await paid(opened, made)).to.deep.equal(before);
    expect(calls.filter((call) => call.hook.endsWith("Failure")).map((call) => [call.hook, call.seen.failure])).to.deep.equal([
      ["onVerifyFailure", { kind: "fault", code: "hook_failed", reason: "Service unavailable: the operator's onBeforeVerify hook failed; nothing was sent" }],
      ["onSettleFailure", { kind: "fault", code: "hook_failed", reason: "Service unavailable: the operator's onBeforeSettle hook failed; nothing was sent" }],
    ]);
    expect(lines.filter((line) => line.message === "request fault").map((line) => line.fields.err)).to.deep.equal([
      "FacilitatorFault: hook_failed (onBeforeVerify threw): onBeforeVerify broke",
      "FacilitatorFault: hook_failed (onBeforeSettle threw): onBeforeSettle broke",
    ]);

    // The after- and failure hooks throw: the answers stand, the settlement is made and recorded, each failure logged.
    const after = await openFacilitator("cronos-testnet", {}, {
      hooks: { onAfterVerify: thrower("onAfterVerify"), onVerifyFailure: thrower("onVerifyFailure"), onAfterSettle: thrower("onAfterSettle"), onSettleFailure: thrower("onSettleFailure") },
      logger,
    });
    const payment = await makePayment(after.chain);
    expect((await post(after, "verify", payment.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
    const settled = await post(after, "settle", payment.body);
    expect(settled.body.event).to.equal("payment.settled");
    expect((await post(after, "verify", payment.body)).body).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });
    expect((await post(after, "settle", payment.body)).body).to.deep.include({ event: "payment.failed", error: "Authorization already used", txHash: settled.body.txHash });
    const { chainId } = after.chain.info;
    expect(await after.facilitator.coordination.ledger.get({ chainId, token: after.chain.token, authorizer: payment.payer.address, nonce: payment.message.nonce })).to.deep.include({ status: "settled", txHash: settled.body.txHash });
    const failedInOrder = ["onAfterVerify", "onAfterSettle", "onVerifyFailure", "onSettleFailure"];
    expect(lines.filter((line) => line.message === "lifecycle hook failed; the answer stands").map((line) => [line.fields.hook, line.fields.err])).to.deep.equal(
      failedInOrder.map((hook) => [hook, `Error: ${hook} broke`]),
    );
  });

  it("hanging: a hook that never answers is given up at timeoutMs (its signal aborted); a before-hook's is a fault with nothing sent, an after-hook's answer stands", async () => {
    const aborted: HookName[] = [];
    const calls: Call[] = [];
    const { logger, lines } = recordingLogger();
    const before = await openFacilitator("cronos-testnet", {}, {
      hooks: recording(calls, { onBeforeVerify: hanging(aborted, "onBeforeVerify"), onBeforeSettle: hanging(aborted, "onBeforeSettle"), timeoutMs: 200 }),
    });
    const made = await makePayment(before.chain);
    const balances = await paid(before, made);
    const late = "Service unavailable: the operator's onBeforeVerify hook did not answer within 200 ms; nothing was sent";
    expect((await post(before, "verify", made.body)).body).to.deep.equal({ isValid: false, invalidReason: late, error: late });
    const settle = await post(before, "settle", made.body);
    expect(settle.status).to.equal(503);
    expect(settle.body.error).to.equal("Service unavailable: the operator's onBeforeSettle hook did not answer within 200 ms; nothing was sent");
    expect(await paid(before, made)).to.deep.equal(balances);
    expect(aborted).to.deep.equal(["onBeforeVerify", "onBeforeSettle"]);

    // After- and failure hooks that never answer: verify and settle answer once their time is up, the settlement made.
    const names = ["onAfterVerify", "onVerifyFailure", "onAfterSettle", "onSettleFailure"] as const;
    const hooks: FacilitatorHooks = { timeoutMs: 200 };
    for (const name of names) hooks[name] = hanging(aborted, name);
    const after = await openFacilitator("cronos-testnet", {}, { hooks, logger });
    const payment = await makePayment(after.chain);
    const start = await paid(after, payment);
    expect((await post(after, "verify", payment.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
    const settled = await post(after, "settle", payment.body);
    expect(settled.body.event).to.equal("payment.settled");
    expect(await paid(after, payment)).to.deep.equal({ payee: start.payee + 1_000_000n, used: true });
    expect((await post(after, "settle", payment.body)).body.error).to.equal("Authorization already used");
    expect((await post(after, "verify", payment.body)).body.invalidReason).to.equal("Authorization already used");
    expect(aborted.slice(2)).to.deep.equal(["onAfterVerify", "onAfterSettle", "onSettleFailure", "onVerifyFailure"]);
    expect(lines.filter((line) => line.message === "lifecycle hook failed; the answer stands").map((line) => line.fields.err)).to.deep.equal(Array(4).fill("no answer within 200 ms"));
  });

  it("refuses a time-out out of range at start, naming it, before anything is opened", async () => {
    for (const timeoutMs of [0, 60_001, 1.5]) {
      const error = await rejection(createFacilitator(loadConfig({ ...TEST_ENV }, { embedded: ["cronos-testnet"] }), { hooks: { timeoutMs } }), StartupError);
      expect(error.message).to.equal(`hooks.timeoutMs: must be an integer from 1 to 60000 (ms), got ${timeoutMs}`);
    }
  });

  it("docs/facilitator.md shows scripts/snippets/facilitator-hooks.ts verbatim (the code the allowlist test runs)", () => {
    const doc = readFileSync(join(ROOT, "docs", "facilitator.md"), "utf8");
    const snippet = readFileSync(join(ROOT, "scripts", "snippets", "facilitator-hooks.ts"), "utf8");
    const shown = snippet.slice(snippet.indexOf("\n") + 1).replaceAll('"../../src/index.js"', '"cronos-x402-facilitator-kit"');
    const blocks = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]);
    expect(blocks).to.include(shown);
  });
});
