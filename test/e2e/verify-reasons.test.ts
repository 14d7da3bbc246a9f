import { expect } from "chai";
import { parseSignature, toHex, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { REFUSAL_CASES, type CaseNeed } from "../../src/conformance/cases.js";
import { describeReason, matchesReason, type ExpectedReason } from "../../src/conformance/expected-reason.js";
import type { CaseContext } from "../../src/conformance/case-payment.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { CANCEL_AUTHORIZATION_TYPES } from "../../src/protocol/eip3009.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import type { PaymentRequirements } from "../../src/protocol/schemas.js";
import { chainTime, increaseTime, tokenBalances, writeToken } from "../helpers/chain.js";
import type { FacilitatorProxy } from "../helpers/facilitator-proxy.js";
import { paymentRequiredBody, PRICE, startSeller, type TestSeller, useSellerEnvironment } from "../helpers/seller.js";

const VERIFICATION_FAILED = "Payment verification failed";

type Route = "testnet" | "mainnet";
const NETWORK_OF: Record<Route, NetworkName> = { testnet: "cronos-testnet", mainnet: "cronos-mainnet" };

// The cases are the conformance catalog's (src/conformance/cases.ts): every refusal a header alone can
// provoke, sent here through a real seller, whose 402 must carry the facilitator's reason.
describe("e2e: every verify reason, through a real seller (402 with the exact reason)", function () {
  let stack: LocalStack;
  let proxy: FacilitatorProxy;
  /** The default seller: answers undecodable headers itself. */
  let seller: TestSeller;
  /** The same seller with `checkHeaderLocally: false`: every header goes to the facilitator. */
  let forwarding: TestSeller;
  let balancesBefore: bigint[][];

  const info = (route: Route) => stack.networks[NETWORK_OF[route]]!;
  const buyerKey = (route: Route) => info(route).buyers[0]!.privateKey;
  const balances = () =>
    Promise.all((["testnet", "mainnet"] as const).map((route) => tokenBalances(info(route).rpcUrl, info(route).token, [privateKeyToAccount(buyerKey(route)).address, stack.seller])));

  const env = useSellerEnvironment();
  before(async () => {
    ({ stack, proxy, seller } = env);
    forwarding = await startSeller(proxy.url, stack.seller, { checkHeaderLocally: false });
  });
  after(async () => {
    await forwarding?.close();
  });
  beforeEach(async () => {
    balancesBefore = await balances();
  });

  /** A refused payment never reaches settle and moves nothing (asserted by each test that refuses, at its end). */
  async function expectNothingMoved(): Promise<void> {
    expect(proxy.paths()).to.not.include("/v2/x402/settle");
    expect(await balances()).to.deep.equal(balancesBefore);
  }

  /** Sends `header` as X-PAYMENT to a route of `to`. */
  function send(header: string, to: TestSeller, route: Route): Promise<Response> {
    return fetch(`${to.url}${to.routes[route]}`, { headers: { "X-PAYMENT": header } });
  }

  /** Asserts the seller's 402 with the expected reason; returns the reason's text. */
  async function expectRefused(response: Response, requirements: PaymentRequirements, expected: ExpectedReason): Promise<string> {
    const text = await response.text();
    expect(response.status, text).to.equal(402);
    const body = JSON.parse(text) as { reason: string };
    expect(matchesReason(body.reason, expected), `reason ${JSON.stringify(body.reason)} is ${describeReason(expected)}`).to.equal(true);
    expect(body).to.deep.equal(paymentRequiredBody(requirements, VERIFICATION_FAILED, body.reason));
    return body.reason;
  }

  /** A nonce the buyer cancelled on chain (cancelAuthorization): used, without a payment. */
  async function cancelledNonce(route: Route): Promise<Hex> {
    const network = info(route);
    const buyer = privateKeyToAccount(buyerKey(route));
    const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
    const signature = await buyer.signTypedData({
      domain: { name: network.domain.name, version: network.domain.version, chainId: network.chainId, verifyingContract: network.token },
      types: CANCEL_AUTHORIZATION_TYPES,
      primaryType: "CancelAuthorization",
      message: { authorizer: buyer.address, nonce },
    });
    const { v, r, s } = parseSignature(signature);
    await writeToken(NETWORK_OF[route], network.rpcUrl, network.token, buyerKey(route), "cancelAuthorization", [buyer.address, nonce, Number(v), r, s]);
    return nonce;
  }

  /** What a case builds its payment from here: the seller's requirements, the funded buyer, the chain's clock. */
  async function caseContext(route: Route, needs: readonly CaseNeed[] = []): Promise<CaseContext> {
    const network = info(route);
    return {
      requirements: seller.requirements[route],
      signer: privateKeyToAccount(buyerKey(route)),
      chainId: network.chainId,
      domain: network.domain,
      now: await chainTime(network.rpcUrl),
      ...(needs.includes("usedNonce") ? { usedNonce: await cancelledNonce(route) } : {}),
    };
  }

  for (const route of ["testnet", "mainnet"] as const) {
    describe(`on the ${route} route`, () => {
      const cases = REFUSAL_CASES.filter((refusal) => refusal.headerOnly && (refusal.networks?.includes(NETWORK_OF[route]) ?? true));

      for (const refusal of cases) {
        it(`answers 402 with the facilitator's reason for ${refusal.title} (${refusal.id})`, async () => {
          const requirements = seller.requirements[route];
          const built = await refusal.build(await caseContext(route, refusal.needs));
          expect(built.paymentRequirements, "the header alone makes the refusal").to.deep.equal(requirements);

          // The default seller answers a header it cannot decode itself, with the facilitator's words.
          const undecodable = built.expected.key === "invalidBase64" || built.expected.key === "invalidHeader";
          const reason = await expectRefused(await send(built.paymentHeader, seller, route), requirements, built.expected);
          // A used authorization may be a retry of a payment to this route: the seller looks it up (here none: 404).
          const used = built.expected.key === "alreadyUsed";
          const calls = undecodable ? [] : used ? ["/v2/x402/verify", "/v2/x402/settlements"] : ["/v2/x402/verify"];
          expect(proxy.paths().map((path) => path.split("?")[0])).to.deep.equal(calls);
          if (used) expect(proxy.calls[1]!.status).to.equal(404);

          // A seller that forwards every header: the 402 carries exactly what verify answered.
          proxy.reset();
          expect(await expectRefused(await send(built.paymentHeader, forwarding, route), requirements, built.expected)).to.equal(reason);
          expect(proxy.paths().map((path) => path.split("?")[0])).to.deep.equal(used ? calls : ["/v2/x402/verify"]);
          expect(proxy.calls[0]!.answer).to.deep.equal({ isValid: false, invalidReason: reason });
          await expectNothingMoved();
        });
      }
    });
  }

  describe("the validity window as the chain's clock moves (evm_increaseTime + evm_mine over RPC)", () => {
    it("pays a header refused as not yet valid once the chain has passed its validAfter", async () => {
      const notYetValid = REFUSAL_CASES.find((refusal) => refusal.id === "not-yet-valid")!;
      const built = await notYetValid.build(await caseContext("testnet"));
      await expectRefused(await send(built.paymentHeader, seller, "testnet"), seller.requirements.testnet, built.expected);

      await increaseTime(info("testnet").rpcUrl, 3601);
      const paid = await send(built.paymentHeader, seller, "testnet");
      expect(paid.status, await paid.clone().text()).to.equal(200);
      expect(proxy.paths()).to.deep.equal(["/v2/x402/verify", "/v2/x402/verify", "/v2/x402/settle"]);
      const [testnet, mainnet] = await balances();
      expect(testnet).to.deep.equal([balancesBefore[0]![0]! - PRICE, balancesBefore[0]![1]! + PRICE]);
      expect(mainnet).to.deep.equal(balancesBefore[1]);
    });

    it("answers Authorization expired for a header that was valid when signed, once the chain passes its validBefore", async () => {
      const now = await chainTime(info("testnet").rpcUrl);
      const header = await createPaymentHeader({ signer: privateKeyToAccount(buyerKey("testnet")), requirements: seller.requirements.testnet, validBefore: now + 60n });
      await increaseTime(info("testnet").rpcUrl, 120);
      await expectRefused(await send(header, seller, "testnet"), seller.requirements.testnet, { key: "expired", text: "Authorization expired" });
      await expectNothingMoved();
    });
  });
});
