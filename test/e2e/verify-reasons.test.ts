import { expect } from "chai";
import { parseSignature, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, type CreatePaymentHeaderParameters } from "../../src/buyer/index.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { CANCEL_AUTHORIZATION_TYPES } from "../../src/protocol/eip3009.js";
import type { PaymentRequirements } from "../../src/protocol/schemas.js";
import {
  chainTime,
  decodeBase64Json,
  encodeBase64Json,
  expectAnswer,
  increaseTime,
  paymentRequiredBody,
  PRICE,
  startSeller,
  tokenBalances,
  writeToken,
  type FacilitatorProxy,
  type TestSeller,
  useSellerEnvironment,
} from "./helpers.js";

const VERIFICATION_FAILED = "Payment verification failed";

describe("e2e: every verify reason, through a real seller (402 with the exact reason)", function () {
  let stack: LocalStack;
  let proxy: FacilitatorProxy;
  /** The default seller: answers undecodable headers itself. */
  let seller: TestSeller;
  /** The same seller with `checkHeaderLocally: false`: every header goes to the facilitator. */
  let forwarding: TestSeller;
  let buyer: ReturnType<typeof privateKeyToAccount>;
  let other: ReturnType<typeof privateKeyToAccount>;
  let balancesBefore: bigint[];

  const testnet = () => stack.networks["cronos-testnet"]!;
  const balances = () => tokenBalances(testnet().rpcUrl, testnet().token, [buyer.address, other.address, stack.seller]);

  const env = useSellerEnvironment();
  before(async () => {
    ({ stack, proxy, seller } = env);
    forwarding = await startSeller(proxy.url, stack.seller, { checkHeaderLocally: false });
    buyer = privateKeyToAccount(testnet().buyers[0]!.privateKey);
    other = privateKeyToAccount(testnet().buyers[1]!.privateKey);
  });
  after(async () => {
    await forwarding?.close();
  });
  /** Set by a test that ends by paying (it checks its own settle and balances); false for every other. */
  let paysAtTheEnd: boolean;
  beforeEach(async () => {
    balancesBefore = await balances();
    paysAtTheEnd = false;
  });
  afterEach(async function () {
    // A refused payment never reaches settle and moves nothing.
    if (this.currentTest?.state !== "passed" || paysAtTheEnd) return;
    expect(proxy.paths()).to.not.include("/v2/x402/settle");
    expect(await balances()).to.deep.equal(balancesBefore);
  });

  /** Sends `header` as X-PAYMENT to a route of `to` (default: the testnet route of the default seller). */
  function send(header: string, to: TestSeller = seller, route: "testnet" | "mainnet" = "testnet"): Promise<Response> {
    return fetch(`${to.url}${to.routes[route]}`, { headers: { "X-PAYMENT": header } });
  }

  async function expectRefused(response: Response, reason: string, requirements: PaymentRequirements = seller.requirements.testnet) {
    await expectAnswer(response, 402, paymentRequiredBody(requirements, VERIFICATION_FAILED, reason));
  }

  /** A header the testnet route would accept, with `overrides` for the signer's inputs. */
  function signed(overrides: Partial<CreatePaymentHeaderParameters> = {}): Promise<string> {
    return createPaymentHeader({ signer: buyer, requirements: seller.requirements.testnet, ...overrides });
  }

  /** Re-encodes a header after changing its decoded JSON (the signature is left as it was). */
  function tampered(header: string, change: (json: Record<string, any>) => void): string {
    const json = decodeBase64Json(header);
    change(json);
    return encodeBase64Json(json);
  }

  describe("undecodable headers (the seller may answer them without the facilitator; both answers are the same)", () => {
    it("answers Invalid Base64 paymentHeader for text that is not base64, and for base64 that is not JSON", async () => {
      for (const header of ["%%%not base64%%%", Buffer.from("hello, seller").toString("base64")]) {
        proxy.reset();
        await expectRefused(await send(header), "Invalid Base64 paymentHeader");
        expect(proxy.paths(), "answered by the seller itself").to.deep.equal([]);
        await expectRefused(await send(header, forwarding), "Invalid Base64 paymentHeader");
        expect(proxy.paths(), "answered by the facilitator").to.deep.equal(["/v2/x402/verify"]);
        expect(proxy.calls[0]!.answer).to.deep.equal({ isValid: false, invalidReason: "Invalid Base64 paymentHeader" });
      }
    });

    it("answers Invalid paymentHeader: naming the field, for JSON of the wrong shape", async () => {
      const header = tampered(await signed(), (json) => (json.payload.from = "0x1234"));
      const reason = "Invalid paymentHeader: payload.from must be a 0x-prefixed 20-byte address";
      await expectRefused(await send(header), reason);
      expect(proxy.paths()).to.deep.equal([]);
      await expectRefused(await send(header, forwarding), reason);
      expect(proxy.paths()).to.deep.equal(["/v2/x402/verify"]);

      const noPayload = encodeBase64Json({ x402Version: 1, scheme: "exact", network: "cronos-testnet" });
      await expectRefused(await send(noPayload), "Invalid paymentHeader: payload is required");
      await expectRefused(await send(noPayload, forwarding), "Invalid paymentHeader: payload is required");
    });
  });

  describe("headers the facilitator refuses before reading the chain", () => {
    it("answers Unsupported scheme: for a header of another scheme", async () => {
      const header = tampered(await signed(), (json) => (json.scheme = "streaming"));
      await expectRefused(await send(header), "Unsupported scheme: streaming");
      expect(proxy.paths()).to.deep.equal(["/v2/x402/verify"]);
    });

    it("answers Unsupported network: for a header signed for cronos-mainnet sent to a cronos-testnet route", async () => {
      const header = await createPaymentHeader({ signer: buyer, requirements: seller.requirements.mainnet });
      await expectRefused(await send(header), "Unsupported network: cronos-mainnet");
      // …and the other way round, the alias kept as written.
      const alias = await createPaymentHeader({ signer: buyer, requirements: { ...seller.requirements.testnet, network: "cronos" } });
      await expectRefused(await send(alias), "Unsupported network: cronos");
    });

    it("answers Unsupported asset: for a header signed for another token", async () => {
      const mainnetToken = "0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C"; // USDC.e on cronos-mainnet
      const header = await signed({ requirements: { ...seller.requirements.testnet, asset: mainnetToken } });
      await expectRefused(await send(header), "Unsupported asset: 0xf951eC28187D9E5Ca673Da8FE6757E6f0Be5F77C");
    });

    it("answers Invalid amount: for a header that pays less than the price", async () => {
      const header = await signed({ requirements: { ...seller.requirements.testnet, maxAmountRequired: String(PRICE - 1n) } });
      await expectRefused(await send(header), "Invalid amount: 9999");
      const zero = tampered(await signed(), (json) => (json.payload.value = "0"));
      await expectRefused(await send(zero), "Invalid amount: 0");
    });

    it("answers Recipient does not match payTo address for a header that pays someone else", async () => {
      const header = await signed({ requirements: { ...seller.requirements.testnet, payTo: other.address } });
      await expectRefused(await send(header), "Recipient does not match payTo address");
    });
  });

  describe("Invalid EIP-3009 signature", () => {
    it("for a signature made by another key than the header's from", async () => {
      const byOther = await createPaymentHeader({ signer: other, requirements: seller.requirements.testnet });
      const header = tampered(byOther, (json) => (json.payload.from = buyer.address));
      await expectRefused(await send(header), "Invalid EIP-3009 signature");
    });

    it("for a signature over the wrong chain id (mainnet's 25 on the testnet route)", async () => {
      await expectRefused(await send(await signed({ chainId: 25 })), "Invalid EIP-3009 signature");
      await expectRefused(await send(await signed({ chainId: 31337 })), "Invalid EIP-3009 signature");
    });

    it("for a mainnet header signed with the testnet domain version 1 (mainnet's USDC.e is version 2)", async () => {
      const requirements = seller.requirements.mainnet;
      const mainnet = stack.networks["cronos-mainnet"]!;
      expect(mainnet.domain.version).to.equal("2");
      const header = await createPaymentHeader({
        signer: privateKeyToAccount(mainnet.buyers[0]!.privateKey),
        requirements,
        domain: { name: mainnet.domain.name, version: "1" },
      });
      await expectRefused(await send(header, seller, "mainnet"), "Invalid EIP-3009 signature", requirements);
    });
  });

  describe("the validity window, by the chain's clock (moved with evm_increaseTime + evm_mine over RPC)", () => {
    it("answers Authorization not yet valid before validAfter, then pays once the chain has passed it", async () => {
      const now = await chainTime(testnet().rpcUrl);
      const header = await signed({ validAfter: now + 300n, validBefore: now + 3600n });
      await expectRefused(await send(header), "Authorization not yet valid");

      await increaseTime(testnet().rpcUrl, 301);
      paysAtTheEnd = true;
      const paid = await send(header);
      expect(paid.status, await paid.clone().text()).to.equal(200);
      expect(proxy.paths()).to.deep.equal(["/v2/x402/verify", "/v2/x402/verify", "/v2/x402/settle"]);
      expect(await balances()).to.deep.equal([balancesBefore[0]! - PRICE, balancesBefore[1]!, balancesBefore[2]! + PRICE]);
    });

    it("answers Authorization expired once the chain passes validBefore, and within the 6 s settle margin", async () => {
      const now = await chainTime(testnet().rpcUrl);
      const header = await signed({ validBefore: now + 60n });
      await increaseTime(testnet().rpcUrl, 120);
      await expectRefused(await send(header), "Authorization expired");

      const later = await chainTime(testnet().rpcUrl);
      await expectRefused(await send(await signed({ validBefore: later + 5n })), "Authorization expired");
    });
  });

  describe("chain state", () => {
    it("answers Authorization already used for a nonce the buyer cancelled on chain (cancelAuthorization)", async () => {
      const info = testnet();
      const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
      const signature = await buyer.signTypedData({
        domain: { name: info.domain.name, version: info.domain.version, chainId: info.chainId, verifyingContract: info.token },
        types: CANCEL_AUTHORIZATION_TYPES,
        primaryType: "CancelAuthorization",
        message: { authorizer: buyer.address, nonce },
      });
      const { v, r, s } = parseSignature(signature);
      await writeToken("cronos-testnet", info.rpcUrl, info.token, testnet().buyers[0]!.privateKey, "cancelAuthorization", [buyer.address, nonce, Number(v), r, s]);

      await expectRefused(await send(await signed({ nonce })), "Authorization already used");
      // (A replay of a header that was paid gets the same answer: see payments.test.ts.)
    });

    it("answers ERC20: transfer amount exceeds balance for a payer without USDC.e", async () => {
      const empty = privateKeyToAccount(generatePrivateKey());
      const header = await createPaymentHeader({ signer: empty, requirements: seller.requirements.testnet });
      await expectRefused(await send(header), "ERC20: transfer amount exceeds balance");
    });
  });
});
