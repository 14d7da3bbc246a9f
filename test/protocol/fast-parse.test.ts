import { expect } from "chai";
import { fastCronosRequest, fastPaymentHeader, fastV2Payment, fastV2Request } from "../../src/protocol/fast-parse.js";
import { facilitatorRequestSchema, paymentHeaderSchema } from "../../src/protocol/schemas.js";
import { v2FacilitatorRequestSchema, v2PaymentPayloadSchema } from "../../src/protocol/x402v2.js";
import { VECTORS, VECTOR_MESSAGE, VECTOR_PAYEE, VECTOR_V2_OFFER } from "../helpers/vectors.js";

const MAX_UINT256 = (1n << 256n) - 1n;

// Values a field may be given instead of its own: each kind of JSON value, and the edges of every check.
const ODD_VALUES: unknown[] = [
  null, true, false, 0, -0, -1, 1, 1.5, 2 ** 53, 2 ** 53 - 1, 1e21, -1e21, "", " ", "0", "00", "-1", "1.5", "1e3", " 5", "5 ", "５",
  MAX_UINT256.toString(), (MAX_UINT256 + 1n).toString(), "0x", "0x1", "0x11", "0xzz", `0x${"a".repeat(40)}`, `0x${"A".repeat(40)}`,
  `0x${"g".repeat(40)}`, VECTOR_PAYEE.toLowerCase(), VECTOR_PAYEE.toUpperCase().replace("0X", "0x"), `0x${"11".repeat(32)}`, `0x${"11".repeat(31)}`,
  "cronos-testnet", "eip155:338", "exact", [], [1], {}, { a: 1 }, "x".repeat(300),
];

/** A deterministic pseudo-random sequence (the same mutations every run). */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state / 0x80000000;
  };
}

/** Every path to a value inside `value` (objects' keys and arrays' indexes), the root included. */
function paths(value: unknown, prefix: string[] = []): string[][] {
  const all = [prefix];
  if (typeof value === "object" && value !== null) for (const [key, inner] of Object.entries(value)) all.push(...paths(inner, [...prefix, key]));
  return all;
}

/** `base` with one change at a random path: deleted, replaced by an odd value, or given an extra key. */
function mutate(base: unknown, next: () => number): unknown {
  const copy = structuredClone(base) as Record<string, unknown>;
  const all = paths(copy);
  const path = all[Math.floor(next() * all.length)]!;
  const odd = ODD_VALUES[Math.floor(next() * ODD_VALUES.length)];
  if (path.length === 0) return next() < 0.5 ? odd : copy;
  const parent = path.slice(0, -1).reduce((o: any, key) => o[key], copy) as Record<string, unknown>;
  const key = path.at(-1)!;
  const how = next();
  if (how < 0.25) delete parent[key];
  else if (how < 0.9) parent[key] = odd;
  else if (typeof parent[key] === "object" && parent[key] !== null) (parent[key] as Record<string, unknown>).extra = odd;
  else parent[`${key}Extra`] = odd;
  return copy;
}

/**
 * Runs `fast` and the schema's parse (`slow`, mapped to the same fields) on `base` and `mutations` mutations
 * of it: wherever the fast check answers, the schema accepts the input and gives the same fields.
 * Returns how many inputs each took.
 */
function holdToSchema<T>(base: unknown, fast: (input: unknown) => T | undefined, slow: (input: unknown) => T | undefined, mutations: number, seed: number) {
  const next = random(seed);
  let fastTook = 0;
  let schemaTook = 0;
  for (let i = 0; i <= mutations; i++) {
    const input = i === 0 ? base : mutate(base, next);
    const quick = fast(input);
    const schema = slow(input);
    if (schema !== undefined) schemaTook++;
    if (quick === undefined) continue;
    fastTook++;
    expect(schema, `the schema refuses what the fast check took: ${JSON.stringify(input)}`).to.not.equal(undefined);
    expect(quick, JSON.stringify(input)).to.deep.equal(schema);
  }
  return { fastTook, schemaTook };
}

const cronosHeader = {
  x402Version: 1,
  scheme: "exact",
  network: "cronos-testnet",
  payload: {
    from: VECTOR_MESSAGE.from, to: VECTOR_MESSAGE.to, value: "1000000", validAfter: 0, validBefore: 1893456000,
    nonce: VECTOR_MESSAGE.nonce, signature: VECTORS.A.signature, asset: VECTORS.A.verifyingContract,
  },
};
const coinbaseHeader = {
  x402Version: 1,
  scheme: "exact",
  network: "cronos-testnet",
  payload: {
    signature: VECTORS.A.signature,
    authorization: { from: VECTOR_MESSAGE.from.toLowerCase(), to: VECTOR_MESSAGE.to, value: 1000000, validAfter: "0", validBefore: "1893456000", nonce: VECTOR_MESSAGE.nonce },
  },
};

const headerBySchema = (input: unknown) => {
  const parsed = paymentHeaderSchema.safeParse(input);
  if (!parsed.success) return undefined;
  const { scheme, network, payload } = parsed.data;
  const nested = "authorization" in payload ? (payload.authorization as Record<string, unknown>) : undefined;
  const fields = (nested ?? payload) as Record<string, unknown>;
  return {
    scheme, network,
    asset: nested ? undefined : (payload as { asset?: string }).asset,
    authorization: { from: fields.from, to: fields.to, value: fields.value, validAfter: fields.validAfter, validBefore: fields.validBefore, nonce: fields.nonce },
    signature: payload.signature,
  };
};

const cronosBody = {
  x402Version: 1,
  paymentHeader: "eyJ4NDAyVmVyc2lvbiI6MX0=",
  paymentRequirements: { scheme: "exact", network: "cronos-testnet", payTo: VECTOR_PAYEE.toLowerCase(), asset: VECTORS.A.verifyingContract, maxAmountRequired: "1000000", description: "d", mimeType: "application/json", maxTimeoutSeconds: 300, resource: "https://x/y" },
};
const cronosBySchema = (input: unknown) => {
  const parsed = facilitatorRequestSchema.safeParse(input);
  if (!parsed.success) return undefined;
  const { paymentHeader, paymentRequirements: r } = parsed.data;
  return { paymentHeader, requirements: { scheme: r.scheme, network: r.network, payTo: r.payTo, asset: r.asset, amount: r.maxAmountRequired } };
};

const v2Payment = {
  x402Version: 2,
  resource: { url: "https://seller.example/paid", description: "d", mimeType: "text/plain" },
  accepted: VECTOR_V2_OFFER,
  payload: {
    signature: VECTORS.A.signature,
    authorization: { from: VECTOR_MESSAGE.from, to: VECTOR_MESSAGE.to, value: "1000000", validAfter: "0", validBefore: "1893456000", nonce: VECTOR_MESSAGE.nonce },
  },
  extensions: { "payment-identifier": { info: { required: false, id: "pay_0123456789abcdef" } } },
};
const v2Body = { x402Version: 2, paymentPayload: v2Payment, paymentRequirements: VECTOR_V2_OFFER };
const v2RequestBySchema = (input: unknown) => {
  const parsed = v2FacilitatorRequestSchema.safeParse(input);
  if (!parsed.success) return undefined;
  const { paymentPayload, paymentRequirements: r } = parsed.data;
  return { paymentPayload, requirements: { scheme: r.scheme, network: r.network, payTo: r.payTo, asset: r.asset, amount: r.amount } };
};
const v2PaymentBySchema = (input: unknown) => {
  const parsed = v2PaymentPayloadSchema.safeParse(input);
  if (!parsed.success) return undefined;
  const { accepted, payload, extensions } = parsed.data;
  const a = payload.authorization;
  return {
    accepted: { scheme: accepted.scheme, network: accepted.network, asset: accepted.asset },
    authorization: { from: a.from, to: a.to, value: a.value, validAfter: a.validAfter, validBefore: a.validBefore, nonce: a.nonce },
    signature: payload.signature,
    extensions,
  };
};
const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

describe("verify's hand-written body and payload checks agree with their zod schemas", () => {
  it("reads both payment-header layouts as paymentHeaderSchema does, on 4,000 mutations each", () => {
    for (const [base, seed] of [[cronosHeader, 1], [coinbaseHeader, 2]] as const) {
      const { fastTook, schemaTook } = holdToSchema(base, fastPaymentHeader, headerBySchema, 4_000, seed);
      expect(fastPaymentHeader(base)).to.not.equal(undefined);
      // The fast check takes nearly everything the schema takes (the rest goes to the schema).
      expect(fastTook).to.be.greaterThan(0.9 * schemaTook);
    }
  });

  it("reads the Cronos body (x402Version 1) as facilitatorRequestSchema does, on 4,000 mutations", () => {
    const { fastTook, schemaTook } = holdToSchema(cronosBody, fastCronosRequest, cronosBySchema, 4_000, 3);
    expect(fastCronosRequest(cronosBody)?.requirements.payTo).to.equal(VECTOR_PAYEE);
    expect(fastTook).to.be.greaterThan(0.9 * schemaTook);
  });

  it("reads the x402 v2 body and payment as their schemas do, on 4,000 mutations each", () => {
    const body = holdToSchema(v2Body, fastV2Request, v2RequestBySchema, 4_000, 4);
    expect(body.fastTook).to.be.greaterThan(0.9 * body.schemaTook);
    // The payment is checked once the body is (an object, then): the schema's output keeps unknown keys, so
    // only the fields the codec reads are compared, and the extensions by content.
    const payment = holdToSchema(
      v2Payment,
      (input) => (isObject(input) ? fastV2Payment(input) : undefined),
      (input) => (isObject(input) ? v2PaymentBySchema(input) : undefined),
      4_000,
      5,
    );
    expect(payment.fastTook).to.be.greaterThan(0.9 * payment.schemaTook);
  });

  it("leaves to the schema what it does not vouch for: a missing field, an unsafe integer, a bad nonce, a value over 2^256", () => {
    const payload = cronosHeader.payload;
    expect(fastPaymentHeader({ ...cronosHeader, x402Version: 2 })).to.equal(undefined);
    expect(fastPaymentHeader({ ...cronosHeader, payload: { ...payload, from: undefined } })).to.equal(undefined);
    expect(fastPaymentHeader({ ...cronosHeader, payload: { ...payload, validBefore: 2 ** 53 } })).to.equal(undefined);
    expect(fastPaymentHeader({ ...cronosHeader, payload: { ...payload, validBefore: (MAX_UINT256 + 1n).toString() } })).to.equal(undefined);
    expect(fastPaymentHeader({ ...cronosHeader, payload: { ...payload, nonce: "0x11" } })).to.equal(undefined);
    expect(fastPaymentHeader({ ...cronosHeader, payload: { ...payload, signature: "0x1" } })).to.equal(undefined);
    expect(fastCronosRequest({ ...cronosBody, paymentRequirements: { ...cronosBody.paymentRequirements, maxTimeoutSeconds: 0 } })).to.equal(undefined);
    expect(fastV2Request({ ...v2Body, paymentRequirements: { ...VECTOR_V2_OFFER, extra: null } })).to.equal(undefined);
  });
});
