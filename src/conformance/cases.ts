import type { Address, Hex, LocalAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../buyer/sign.js";
import { transferAuthorizationTypedData } from "../protocol/eip3009.js";
import { CRONOS_MAINNET, CRONOS_MAINNET_ALIAS, CRONOS_TESTNET, NETWORKS, canonicalNetwork, type NetworkName } from "../protocol/networks.js";
import { EXACT_SCHEME, VerifyReason } from "../protocol/reasons.js";
import type { PaymentRequirementsInput } from "../protocol/schemas.js";
import { decodeHeaderJson, encodeHeaderJson, signFor, tamper, type CaseContext } from "./case-payment.js";
import type { Dialect } from "./check.js";
import type { ExpectedReason, VerifyReasonKey } from "./expected-reason.js";

// The payments a facilitator must refuse, each with the reason it must give. One list, used by the
// conformance checks (sent to verify and settle directly) and by the end-to-end suite (sent through a
// seller, whose 402 must carry the same reason).

/** A payment to send: the header and the requirements to send with it. */
export interface BuiltPayment {
  paymentHeader: string;
  paymentRequirements: PaymentRequirementsInput;
  expected: ExpectedReason;
}

/** What a case needs from its context. */
export type CaseNeed =
  /** A nonce the signer used (from a payment of this run, or the chain's logs). */
  | "usedNonce"
  /** The chain's own clock, to the second (the settle margin). */
  | "chainClock";

/** A payment the facilitator must refuse, and how. */
export interface RefusalCase {
  /** Stable id; the checks are `verify.<id>` and `settle.<id>`. */
  id: string;
  /** The payment, in words ("a header that pays less than the price"). */
  title: string;
  /** The spec row or decision. */
  spec: string;
  /**
   * The header alone makes the refusal (the requirements are the seller's, unchanged), so a seller
   * forwarding it must answer 402 with the same reason.
   */
  headerOnly: boolean;
  /** Settle is checked with it too (each of settle's own words, and one verify reason passed through). */
  settle?: boolean;
  needs?: readonly CaseNeed[];
  /** Networks it applies to (default all). */
  networks?: readonly NetworkName[];
  /** Dialects that can express it (default both): a header that is not base64 exists only in the Cronos one. */
  dialects?: readonly Dialect[];
  build(context: CaseContext): Promise<BuiltPayment>;
}

/** The other Cronos network than the context's (for a header signed for the wrong one). */
function otherNetwork(context: CaseContext): (typeof NETWORKS)[NetworkName] {
  return NETWORKS[canonicalNetwork(context.requirements.network) === CRONOS_MAINNET ? CRONOS_TESTNET : CRONOS_MAINNET];
}

function exact(key: VerifyReasonKey, text: string): ExpectedReason {
  return { key, text };
}

function freshAccount(): LocalAccount {
  return privateKeyToAccount(generatePrivateKey());
}

const HOUR = 3600n;

/** Every refusal, in the order of verify's checks (spec 4.3; decisions › Verify). */
export const REFUSAL_CASES: readonly RefusalCase[] = [
  {
    id: "header-not-base64",
    title: "a header that is not base64",
    spec: "spec 7.1 Invalid Base64 paymentHeader",
    headerOnly: true,
    dialects: ["cronos"],
    async build({ requirements }) {
      return { paymentHeader: "%%%not base64%%%", paymentRequirements: requirements, expected: exact("invalidBase64", VerifyReason.invalidBase64) };
    },
  },
  {
    id: "header-not-json",
    title: "a base64 header that is not JSON",
    spec: "spec 7.1 Invalid Base64 paymentHeader; decisions › Verify 1",
    headerOnly: true,
    dialects: ["cronos"],
    async build({ requirements }) {
      const paymentHeader = Buffer.from("hello, seller").toString("base64");
      return { paymentHeader, paymentRequirements: requirements, expected: exact("invalidBase64", VerifyReason.invalidBase64) };
    },
  },
  {
    id: "header-wrong-shape",
    title: "a header whose JSON has a malformed field (payload.from)",
    spec: "decisions › Verify 1: Invalid paymentHeader: <what is wrong>",
    headerOnly: true,
    async build(context) {
      const paymentHeader = tamper(await signFor(context), (json) => (json.payload.from = "0x1234"));
      return { paymentHeader, paymentRequirements: context.requirements, expected: { key: "invalidHeader", startsWith: "Invalid paymentHeader: ", mentions: "payload.from" } };
    },
  },
  {
    id: "header-without-payload",
    title: "a header without its payload",
    spec: "decisions › Verify 1: Invalid paymentHeader: <what is wrong>",
    headerOnly: true,
    async build({ requirements }) {
      const paymentHeader = encodeHeaderJson({ x402Version: 1, scheme: EXACT_SCHEME, network: requirements.network });
      return { paymentHeader, paymentRequirements: requirements, expected: { key: "invalidHeader", startsWith: "Invalid paymentHeader: ", mentions: "payload" } };
    },
  },
  {
    id: "scheme-of-header",
    title: "a header of another scheme",
    spec: "spec 4.3 check 2, 7.1 Unsupported scheme",
    headerOnly: true,
    async build(context) {
      const paymentHeader = tamper(await signFor(context), (json) => (json.scheme = "streaming"));
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("unsupportedScheme", VerifyReason.unsupportedScheme("streaming")) };
    },
  },
  {
    id: "scheme-of-requirements",
    title: "requirements of another scheme",
    spec: "spec 4.3 check 2, 7.1 Unsupported scheme",
    headerOnly: false,
    async build(context) {
      return {
        paymentHeader: await signFor(context),
        paymentRequirements: { ...context.requirements, scheme: "upto" },
        expected: exact("unsupportedScheme", VerifyReason.unsupportedScheme("upto")),
      };
    },
  },
  {
    id: "network-of-header",
    title: "a header signed for the other Cronos network",
    spec: "spec 4.3 check 3, 7.1 Unsupported network",
    headerOnly: true,
    async build(context) {
      const other = otherNetwork(context);
      const paymentHeader = await createPaymentHeader({
        signer: context.signer,
        requirements: { ...context.requirements, network: other.network, asset: other.token },
        now: Number(context.now),
      });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("unsupportedNetwork", VerifyReason.unsupportedNetwork(other.network)) };
    },
  },
  {
    id: "network-alias-of-header",
    title: "a header signed for mainnet under its alias cronos (the answer names the network as written)",
    spec: "spec 4.3 check 3, 7.1 Unsupported network; decisions › Networks: cronos answered as sent",
    headerOnly: true,
    networks: [CRONOS_TESTNET],
    async build(context) {
      const mainnet = NETWORKS[CRONOS_MAINNET];
      const paymentHeader = await createPaymentHeader({
        signer: context.signer,
        requirements: { ...context.requirements, network: CRONOS_MAINNET_ALIAS, asset: mainnet.token },
        now: Number(context.now),
      });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("unsupportedNetwork", VerifyReason.unsupportedNetwork(CRONOS_MAINNET_ALIAS)) };
    },
  },
  {
    id: "network-unknown",
    title: "requirements and header on a network the facilitator does not serve (base-sepolia)",
    spec: "spec 4.3 check 3, 7.1 Unsupported network",
    headerOnly: false,
    async build(context) {
      const paymentRequirements = { ...context.requirements, network: "base-sepolia" };
      const paymentHeader = await signFor(context, { requirements: paymentRequirements });
      return { paymentHeader, paymentRequirements, expected: exact("unsupportedNetwork", VerifyReason.unsupportedNetwork("base-sepolia")) };
    },
  },
  {
    id: "network-alias",
    title: "an empty payer on mainnet named by its alias cronos, for its balance (the alias itself passes)",
    spec: "spec 2.1, 9 (cronos for mainnet); decisions › Networks: cronos is an alias of cronos-mainnet",
    headerOnly: false,
    networks: [CRONOS_MAINNET],
    dialects: ["cronos"],
    async build(context) {
      const paymentRequirements = { ...context.requirements, network: CRONOS_MAINNET_ALIAS };
      const paymentHeader = await signFor({ ...context, signer: freshAccount() }, { requirements: paymentRequirements });
      return { paymentHeader, paymentRequirements, expected: exact("insufficientBalance", VerifyReason.insufficientBalance) };
    },
  },
  {
    id: "asset-of-header",
    title: "a header signed for another token",
    spec: "spec 4.3 check 4, 7.1 Unsupported asset",
    headerOnly: true,
    async build(context) {
      const asset = otherNetwork(context).token;
      const paymentHeader = await signFor(context, { requirements: { ...context.requirements, asset } });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("unsupportedAsset", VerifyReason.unsupportedAsset(asset)) };
    },
  },
  {
    id: "asset-of-requirements",
    title: "requirements naming another token",
    spec: "spec 4.3 check 4, 7.1 Unsupported asset",
    headerOnly: false,
    async build(context) {
      const asset = otherNetwork(context).token;
      return {
        paymentHeader: await signFor(context),
        paymentRequirements: { ...context.requirements, asset },
        expected: exact("unsupportedAsset", VerifyReason.unsupportedAsset(asset)),
      };
    },
  },
  {
    id: "amount-below-price",
    title: "a header that pays one unit less than the price",
    spec: "spec 4.3 check 4, 7.1 Invalid amount (scheme exact)",
    headerOnly: true,
    async build(context) {
      const less = String(BigInt(context.requirements.maxAmountRequired) - 1n);
      const paymentHeader = await signFor(context, { requirements: { ...context.requirements, maxAmountRequired: less } });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("invalidAmount", VerifyReason.invalidAmount(less)) };
    },
  },
  {
    id: "amount-zero",
    title: "a header whose value is 0",
    spec: "spec 4.3 check 4, 7.1 Invalid amount",
    headerOnly: true,
    async build(context) {
      const paymentHeader = tamper(await signFor(context), (json) => (json.payload.value = "0"));
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("invalidAmount", VerifyReason.invalidAmount("0")) };
    },
  },
  {
    id: "recipient-mismatch",
    title: "a header that pays someone other than payTo",
    spec: "spec 4.3 check 5, 7.1 Recipient does not match payTo address",
    headerOnly: true,
    settle: true,
    async build(context) {
      const paymentHeader = await signFor(context, { requirements: { ...context.requirements, payTo: freshAccount().address } });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("recipientMismatch", VerifyReason.recipientMismatch) };
    },
  },
  {
    id: "signature-other-key",
    title: "a header whose signature is by another key than its from",
    spec: "spec 4.3 check 6, 7.1 Invalid EIP-3009 signature; 7.2 Invalid signature",
    headerOnly: true,
    settle: true,
    async build(context) {
      // Another key signs the very message the header carries (from = the signer).
      const header = await signFor(context);
      const p = decodeHeaderJson(header).payload as Record<string, string | number>;
      const message = {
        from: context.signer.address,
        to: p.to as Address,
        value: BigInt(p.value!),
        validAfter: BigInt(p.validAfter!),
        validBefore: BigInt(p.validBefore!),
        nonce: p.nonce as Hex,
      };
      const domain = { ...context.domain, chainId: context.chainId, verifyingContract: context.requirements.asset as Address };
      const signature = await freshAccount().signTypedData(transferAuthorizationTypedData(domain, message));
      const paymentHeader = tamper(header, (json) => (json.payload.signature = signature));
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("invalidSignature", VerifyReason.invalidSignature) };
    },
  },
  {
    id: "signature-other-chain",
    title: "a header signed over the other network's chain id",
    spec: "spec 4.3 check 6 (EIP-712 domain chain id), 7.1 Invalid EIP-3009 signature",
    headerOnly: true,
    async build(context) {
      const paymentHeader = await signFor(context, { chainId: otherNetwork(context).chainId });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("invalidSignature", VerifyReason.invalidSignature) };
    },
  },
  {
    id: "signature-other-version",
    title: "a header signed with the wrong EIP-712 domain version",
    spec: "spec 4.3 check 6 (EIP-712 domain version: 1 on testnet, 2 on mainnet), 7.1 Invalid EIP-3009 signature",
    headerOnly: true,
    async build(context) {
      const version = context.domain.version === "1" ? "2" : "1";
      const paymentHeader = await signFor(context, { domain: { name: context.domain.name, version } });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("invalidSignature", VerifyReason.invalidSignature) };
    },
  },
  {
    id: "not-yet-valid",
    title: "an authorization valid only from an hour ahead",
    spec: "spec 4.3 check 7, 7.2 Authorization not yet valid; decisions › Verify 7 (chain clock)",
    headerOnly: true,
    settle: true,
    async build(context) {
      const paymentHeader = await signFor(context, { validAfter: context.now + HOUR, validBefore: context.now + 2n * HOUR });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("notYetValid", VerifyReason.notYetValid) };
    },
  },
  {
    id: "expired",
    title: "an authorization that expired an hour ago",
    spec: "spec 4.3 check 7, 7.2 Authorization expired",
    headerOnly: true,
    settle: true,
    async build(context) {
      const paymentHeader = await signFor(context, { validBefore: context.now - HOUR });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("expired", VerifyReason.expired) };
    },
  },
  {
    id: "expires-within-margin",
    title: "an authorization expiring 3 s from the chain's now (inside the 6 s settle margin)",
    spec: "decisions › Verify 7: now + settle margin (6 s) >= validBefore is Authorization expired",
    headerOnly: true,
    needs: ["chainClock"],
    async build(context) {
      const paymentHeader = await signFor(context, { validBefore: context.now + 3n });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("expired", VerifyReason.expired) };
    },
  },
  {
    id: "nonce-used",
    title: "an authorization whose nonce the payer has already used",
    spec: "spec 3, 4.4 (unique nonces), 7.2 Authorization already used; decisions › Verify 8",
    headerOnly: true,
    settle: true,
    needs: ["usedNonce"],
    async build(context) {
      const paymentHeader = await signFor(context, { nonce: context.usedNonce! });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("alreadyUsed", VerifyReason.alreadyUsed) };
    },
  },
  {
    id: "balance-too-low",
    title: "a payer that holds no USDC.e (a fresh key)",
    spec: "spec 7.2 ERC20: transfer amount exceeds balance; decisions › Verify 8",
    headerOnly: true,
    settle: true,
    async build(context) {
      const paymentHeader = await signFor({ ...context, signer: freshAccount() });
      return { paymentHeader, paymentRequirements: context.requirements, expected: exact("insufficientBalance", VerifyReason.insufficientBalance) };
    },
  },
];
