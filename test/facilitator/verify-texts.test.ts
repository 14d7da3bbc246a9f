import { expect } from "chai";
import request from "supertest";
import { privateKeyToAccount } from "viem/accounts";
import { cancelAuthorization, HARDHAT_KEYS, makePayment, openFacilitator, v2BodyOf, type MakePaymentOptions } from "../helpers/facilitator.js";

// Issue 44 item 6: verify's reason texts pinned to the specification byte for byte, as settle's are. The tables
// below are copied from facilitator-spec.md section 7.1 and decisions.md ("Verify"), as written there; nothing is
// taken from the code's constants. Each row is provoked on a real chain and asked of /v2/x402/verify in each
// dialect: the Cronos `invalidReason`, and x402 v2's `invalidMessage`, must be the row's text with its placeholder
// filled in by what was sent, to the byte.

/** facilitator-spec.md, 7.1 Verify: `invalidReason` texts (with `isValid` false). */
const SPEC_7_1 = `
| \`Unsupported scheme: <scheme>\` | Scheme is not supported |
| \`Unsupported network: <network>\` | Network is not supported |
| \`Unsupported asset: <asset>\` | Asset is not the supported token |
| \`Recipient does not match payTo address\` | Recipient differs from \`payTo\` |
| \`Invalid amount: <amount>\` | Amount check fails |
| \`Invalid EIP-3009 signature\` | Signature check fails |
| \`Invalid Base64 paymentHeader\` | Header is not valid Base64 |
`;

/** decisions.md, Verify: the texts it adds (the header's shape, the window, the chain's state). */
const DECISIONS_VERIFY = `
1. header not base64, or not JSON → \`Invalid Base64 paymentHeader\`. Decodes to JSON of the wrong
   shape → \`Invalid paymentHeader: <what is wrong>\`.
7. time window, by the chain's clock (latest block timestamp): \`now <= validAfter\` → \`Authorization not yet valid\`;
   \`now + settleMarginSeconds >= validBefore\` (margin default 6 s, so a settle has time to land) → \`Authorization expired\`.
8. Beyond the spec, read-only chain state, no transaction: nonce already used or cancelled
   (\`authorizationState\`) → \`Authorization already used\`; \`balanceOf(from) < value\` →
   \`ERC20: transfer amount exceeds balance\`. Verify and settle share one vocabulary.
`;

/** The texts a table holds, each between backticks and holding no space-free code word (a field name is not a text). */
function textsOf(table: string): string[] {
  return [...table.matchAll(/`([^`]+)`/g)].map((match) => match[1]!).filter((text) => /[A-Z]/.test(text[0]!) && text.includes(" "));
}

type Opened = Awaited<ReturnType<typeof openFacilitator>>;
type Made = Awaited<ReturnType<typeof makePayment>>;
type Body = Record<string, unknown> & { paymentRequirements: Record<string, unknown> };

const OTHER_TOKEN = "0x5FbDB2315678afecb367f032d93F642f64180aa3";

/** How to provoke one text, and what fills its placeholder, per dialect (a dialect without the condition: absent). */
interface Provoke {
  options?: (now: bigint) => MakePaymentOptions;
  before?: (opened: Opened, made: Made) => Promise<void>;
  cronos?: (body: Body) => { body: Body; fill?: string };
  v2?: (body: Body) => { body: Body; fill?: string };
}

const requirements = (body: Body, change: Record<string, unknown>): Body => ({ ...body, paymentRequirements: { ...body.paymentRequirements, ...change } });

const PROVOKE: Readonly<Record<string, Provoke>> = {
  "Unsupported scheme: <scheme>": {
    cronos: (body) => ({ body: requirements(body, { scheme: "upto" }), fill: "upto" }),
    v2: (body) => ({ body: requirements(body, { scheme: "upto" }), fill: "upto" }),
  },
  "Unsupported network: <network>": {
    cronos: (body) => ({ body: requirements(body, { network: "cronos-mainnet" }), fill: "cronos-mainnet" }),
    // x402 v2's message is the Cronos dialect's text: the network named as the checks read it.
    v2: (body) => ({ body: requirements(body, { network: "eip155:25" }), fill: "cronos-mainnet" }),
  },
  "Unsupported asset: <asset>": {
    cronos: (body) => ({ body: requirements(body, { asset: OTHER_TOKEN }), fill: OTHER_TOKEN }),
    v2: (body) => ({ body: requirements(body, { asset: OTHER_TOKEN }), fill: OTHER_TOKEN }),
  },
  "Recipient does not match payTo address": {
    cronos: (body) => ({ body: requirements(body, { payTo: privateKeyToAccount(HARDHAT_KEYS.buyer2).address }) }),
    v2: (body) => ({ body: requirements(body, { payTo: privateKeyToAccount(HARDHAT_KEYS.buyer2).address }) }),
  },
  "Invalid amount: <amount>": {
    cronos: (body) => ({ body: requirements(body, { maxAmountRequired: "2000000" }), fill: "1000000" }),
    v2: (body) => ({ body: requirements(body, { amount: "2000000" }), fill: "1000000" }),
  },
  "Invalid EIP-3009 signature": { options: () => ({ chainId: 1 }), cronos: (body) => ({ body }), v2: (body) => ({ body }) },
  // x402 v2 carries no Base64 header: the condition has no counterpart there.
  "Invalid Base64 paymentHeader": { cronos: (body) => ({ body: { ...body, paymentHeader: "not base64!" } }) },
  "Invalid paymentHeader: <what is wrong>": {
    cronos: (body) => ({
      body: { ...body, paymentHeader: Buffer.from(JSON.stringify({ x402Version: 1, scheme: "exact", network: "cronos-testnet" })).toString("base64") },
      fill: "payload is required",
    }),
  },
  "Authorization not yet valid": { options: (now) => ({ validAfter: now + 600n }), cronos: (body) => ({ body }), v2: (body) => ({ body }) },
  "Authorization expired": { options: (now) => ({ validBefore: now + 3n }), cronos: (body) => ({ body }), v2: (body) => ({ body }) },
  "Authorization already used": { before: (opened, made) => cancelAuthorization(opened, made.message.nonce), cronos: (body) => ({ body }), v2: (body) => ({ body }) },
  "ERC20: transfer amount exceeds balance": { options: () => ({ amount: 10n ** 15n }), cronos: (body) => ({ body }), v2: (body) => ({ body }) },
};

/** A text with its placeholder (`<…>`) filled. */
const filled = (text: string, fill: string | undefined) => (fill === undefined ? text : text.replace(/<[^>]+>/, fill));

describe("verify's reason texts are the specification's, byte for byte, in each dialect", () => {
  let opened: Opened;
  before(async () => {
    opened = await openFacilitator("cronos-testnet");
  });

  it("holds every text of the spec's table 7.1 and of decisions.md's Verify, and a way to provoke each", () => {
    const texts = [...new Set([...textsOf(SPEC_7_1), ...textsOf(DECISIONS_VERIFY)])];
    expect(texts).to.have.length(12);
    expect(Object.keys(PROVOKE).sort()).to.deep.equal([...texts].sort());
  });

  for (const text of [...new Set([...textsOf(SPEC_7_1), ...textsOf(DECISIONS_VERIFY)])]) {
    const provoke = PROVOKE[text] ?? {};
    const where = [provoke.cronos && "the Cronos invalidReason", provoke.v2 && "the x402 v2 invalidMessage"].filter(Boolean).join(" and ");
    it(`answers "${text}" in ${where || "no dialect"}, to the byte`, async () => {
      const now = (await opened.chain.publicClient.getBlock()).timestamp;
      const made = await makePayment(opened.chain, provoke.options?.(now));
      await provoke.before?.(opened, made);
      const asked: Array<["cronos" | "x402v2", { body: Body; fill?: string }]> = [];
      if (provoke.cronos) asked.push(["cronos", provoke.cronos(made.body as unknown as Body)]);
      if (provoke.v2) asked.push(["x402v2", provoke.v2(v2BodyOf(made) as unknown as Body)]);
      expect(asked.length, "at least one dialect asked").to.be.greaterThan(0);
      for (const [dialect, { body, fill }] of asked) {
        const answer = await request(opened.app).post("/v2/x402/verify").send(body);
        expect(answer.status, dialect).to.equal(200);
        const field = dialect === "cronos" ? "invalidReason" : "invalidMessage";
        const expected = filled(text, fill);
        const said = (answer.body as Record<string, unknown>)[field];
        expect(typeof said === "string" && Buffer.from(said, "utf8").equals(Buffer.from(expected, "utf8")), `${dialect} ${field}: ${String(said)}`).to.equal(true);
        // And as written on the wire: the answer's own bytes carry the text as a JSON string.
        expect(answer.text, dialect).to.include(`"${field}":${JSON.stringify(expected)}`);
      }
    });
  }
});
