import { isAddressEqual } from "viem";
import { canonicalNetwork } from "../protocol/networks.js";
import type { Payment } from "../protocol/payment.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import { recoverSigner, transferAuthorizationDigest } from "../chain/signature.js";
import { activeTracer, inSpan, PaymentAttribute, paymentAttributes } from "../telemetry/spans.js";
import { payerInMemory, readPayerState, type PayerState, type ReadOptions } from "./payer-state.js";
import { QUIET_CLOCK, type SettlementDeps, type StageClock } from "./deps.js";
import { FacilitatorFault } from "./faults.js";
import { refuse, type RefusedPayment, type VerifyOutcome } from "./verify-outcome.js";

const MAX_UINT256 = (1n << 256n) - 1n;

/** Options of {@link verifyPayment}. */
export interface VerifyOptions {
  /** Settle's check: the payer's state read afresh at the latest block, never from the index or a cache. */
  freshHead?: boolean;
  /** Times verify's stages (the verify budget, `METRICS_VERIFY_STAGES`); default {@link QUIET_CLOCK}, which times nothing. */
  clock?: StageClock;
}

/**
 * Verifies a payment against its requirements: the spec's checks in the spec's order (header,
 * scheme, network, asset and amount, recipient, signature, time window), then read-only chain state
 * (nonce used, balance). The first failure is the answer. The signature is recovered before anything
 * is read: a signature that is not the payer's costs one read (is the payer a contract wallet?).
 * Chain reads are pinned to one block whose timestamp is the clock; verify may reuse a head read
 * within `headCacheMs`, settle passes `freshHead`. Throws {@link FacilitatorFault} only when the
 * chain cannot be read.
 *
 * The payment comes from a dialect's codec (`dialects/`), already decoded: verify does not know
 * which dialect carried it. The payment identifier is the caller's ({@link identifierGate}).
 */
export async function verifyPayment(payment: Payment, deps: SettlementDeps, options: VerifyOptions = {}): Promise<VerifyOutcome> {
  // Within a traced request: the checks are a span, with the payment's terms and what they answered.
  const tracer = activeTracer();
  if (!tracer) return checkPayment(payment, deps, options);
  return inSpan(tracer, "x402 verify", { attributes: verifyAttributes(payment) }, async (span) => {
    const checked = await checkPayment(payment, deps, options);
    span.setAttribute(PaymentAttribute.outcome, checked.isValid ? "valid" : checked.code);
    return checked;
  });
}

/** A payment's terms as its spans show them: the network asked, and the authorization's parties, value and nonce. */
function verifyAttributes(payment: Payment) {
  const authorization = payment.payload.ok ? payment.payload.payload.authorization : undefined;
  return paymentAttributes({
    network: payment.requirements.network,
    ...(authorization ? { payer: authorization.from, payee: authorization.to, value: authorization.value, nonce: authorization.nonce } : {}),
  });
}

/** The spec's checks, in its order (see {@link verifyPayment}). */
async function checkPayment(payment: Payment, deps: SettlementDeps, options: VerifyOptions): Promise<VerifyOutcome> {
  const clock: StageClock = options.clock ?? QUIET_CLOCK;
  let since = clock.start();
  const requirements = payment.requirements;

  // 1. header (the payer's part, decoded by the codec; refused here when it could not be read)
  const decoded = payment.payload;
  if (!decoded.ok) return refuse(decoded.code, decoded.detail);
  const payload = decoded.payload;
  const authorization = payload.authorization;

  // 2. scheme
  if (requirements.scheme !== EXACT_SCHEME) return refuse("scheme", requirements.scheme, { payload });
  if (payload.scheme !== requirements.scheme) return refuse("scheme", payload.scheme, { payload });

  // 3. network (the `cronos` alias is mainnet)
  const networkName = canonicalNetwork(requirements.network);
  const runtime = networkName && deps.networks.get(networkName);
  if (!runtime) return refuse("network", requirements.network, { payload });
  if (canonicalNetwork(payload.network) !== networkName) {
    return refuse("network", payload.network, { payload, runtime });
  }

  // 4. asset and amount (scheme `exact`: the value is the required amount)
  const token = runtime.config.token;
  if (requirements.asset.toLowerCase() !== token.toLowerCase()) {
    return refuse("asset", requirements.asset, { payload, runtime });
  }
  if (payload.asset !== undefined && payload.asset.toLowerCase() !== token.toLowerCase()) {
    return refuse("asset", payload.asset, { payload, runtime });
  }
  const value = /^\d{1,78}$/.test(authorization.value) ? BigInt(authorization.value) : -1n;
  if (value <= 0n || value > MAX_UINT256 || value !== BigInt(requirements.amount)) {
    return refuse("amount", authorization.value, { payload, runtime });
  }

  // 5. recipient
  if (!isAddressEqual(authorization.to, requirements.payTo)) {
    return refuse("recipient", undefined, { payload, runtime });
  }

  // 6. signature, as the token checks it: ECDSA for an address without code, ERC-1271 otherwise.
  // What needs no chain comes first: the ECDSA recovery. Then the reads, pinned to one block.
  since = clock.lap("checks", since);
  const digest = transferAuthorizationDigest(runtime.separator, {
    from: authorization.from,
    to: authorization.to,
    value,
    validAfter: authorization.validAfter,
    validBefore: authorization.validBefore,
    nonce: authorization.nonce,
  });
  since = clock.lap("typedDataHash", since);
  // On the pool's worker threads when the process is busy (chain/recovery-pool.ts), else here.
  // The stage times this thread's part (the wait for a worker is not this thread's CPU).
  let signer = deps.recovery ? deps.recovery.recover(digest, authorization.signature) : recoverSigner(digest, authorization.signature);
  since = clock.lap("recovery", since);
  if (typeof signer === "object") {
    signer = await signer;
    since = clock.start();
  }
  // Recovery answers in lower case: the payer's address, checked by the codec, compares as such.
  const signedByPayer = signer !== undefined && signer === authorization.from.toLowerCase();
  const readOptions: ReadOptions = {
    headAgeMs: options.freshHead ? 0 : deps.settings.headCacheMs,
    fresh: options.freshHead === true,
    erc1271GasLimit: deps.settings.relayerSafety.erc1271GasLimit,
    source: deps.observer.verifyStateSource,
  };
  // A payer whose whole state is in memory (the index's, and its code read at that block) is answered
  // without a promise; otherwise the reads, which may wait on the chain.
  let chain: PayerState | RefusedPayment | undefined = signedByPayer && !readOptions.fresh ? payerInMemory(runtime, authorization, readOptions) : undefined;
  if (chain) clock.lap("indexRead", since);
  else {
    clock.waited();
    try {
      chain = await readPayerState(runtime, authorization, digest, signedByPayer, readOptions);
    } catch (error) {
      throw new FacilitatorFault({ code: "chain_unreadable", network: runtime.config.network, read: "state" }, { cause: error });
    }
  }
  if ("isValid" in chain) return { ...chain, payload, runtime };
  const { head, codeHash, used, balance } = chain;
  const extra = { payload, runtime, head };

  // 7. validity window by the chain's clock; leave settle time to land before validBefore
  if (head.timestamp <= authorization.validAfter) return refuse("notYetValid", undefined, extra);
  if (head.timestamp + BigInt(deps.settings.settleMarginSeconds) >= authorization.validBefore) {
    return refuse("expired", undefined, extra);
  }

  // 8. read-only state: a spent nonce, and funds
  if (used) return refuse("used", undefined, extra);
  if (balance < value) return refuse("balance", undefined, extra);

  return { isValid: true, runtime, payload, value, head, balance, contractWallet: codeHash !== undefined };
}
