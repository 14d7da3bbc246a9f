import { expect } from "chai";
import axios from "axios";
import { ethers } from "ethers";
import { CronosNetwork, Facilitator } from "@crypto.com/facilitator-client";
import { wrapAxiosWithPayment, x402Client as axiosX402Client } from "@x402/axios";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { getPaymentResponse, getV2PaymentResponse, wrapFetchWithPayment } from "../../src/buyer/index.js";
import type { LocalStack } from "../../src/harness/stack.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import { x402Buyer } from "../../scripts/snippets/x402-buyer.js";
import { x402Seller } from "../../scripts/snippets/x402-seller.js";
import { TX_HASH } from "../helpers/chain.js";
import { type FacilitatorProxy, startFacilitatorProxy } from "../helpers/facilitator-proxy.js";
import { CAIP2 } from "../helpers/facilitator.js";
import { decodeBase64Json, listen, type Listening } from "../helpers/http.js";
import { content, PRICE, STACK_OPTIONS, startSeller, startTestStack, type TestSeller } from "../helpers/seller.js";
import { expectPaidOnChain, partyBalances } from "./helpers.js";

/** What a buyer got: the status, the body, the settlement's transaction and the header it came in. */
interface Paid {
  status: number;
  body: unknown;
  txHash: string;
  responseHeader: "X-PAYMENT-RESPONSE" | "PAYMENT-RESPONSE";
}

type BuyerName = "kit buyer" | "@x402/fetch" | "@x402/axios" | "@crypto.com/facilitator-client flow";
type SellerName = "kit seller middleware" | "@x402/express paymentMiddleware";

/** Each buyer, paying `url` on `network` with the key `privateKey`. */
const BUYERS: Record<BuyerName, (url: string, network: NetworkName, privateKey: Hex, stack: LocalStack) => Promise<Paid>> = {
  async "kit buyer"(url, network, privateKey) {
    const pay = wrapFetchWithPayment(fetch, { signer: privateKeyToAccount(privateKey), maxAmount: PRICE, networks: [network] });
    const response = await pay(url);
    const cronos = getPaymentResponse(response);
    const v2 = getV2PaymentResponse(response);
    const txHash = cronos?.event === "payment.settled" ? cronos.txHash : (v2?.transaction ?? "");
    return { status: response.status, body: await response.json(), txHash, responseHeader: cronos ? "X-PAYMENT-RESPONSE" : "PAYMENT-RESPONSE" };
  },

  // The @x402/fetch snippet of docs/x402-packages.md.
  async "@x402/fetch"(url, network, privateKey) {
    const response = await x402Buyer(privateKey, CAIP2[network])(url);
    const settlement = decodeBase64Json(response.headers.get("PAYMENT-RESPONSE"));
    expect(settlement).to.include({ success: true, network: CAIP2[network], payer: privateKeyToAccount(privateKey).address });
    return { status: response.status, body: await response.json(), txHash: String(settlement.transaction), responseHeader: "PAYMENT-RESPONSE" };
  },

  async "@x402/axios"(url, network, privateKey) {
    const client = new axiosX402Client().register(CAIP2[network], new ExactEvmScheme(privateKeyToAccount(privateKey)));
    const api = wrapAxiosWithPayment(axios.create(), client);
    const response = await api.get(url);
    const settlement = decodeBase64Json(response.headers["payment-response"] as string | undefined);
    expect(settlement).to.include({ success: true, network: CAIP2[network] });
    return { status: response.status, body: response.data, txHash: String(settlement.transaction), responseHeader: "PAYMENT-RESPONSE" };
  },

  // The official Cronos client signs (over its provider's chain id) and the header goes in X-PAYMENT.
  async "@crypto.com/facilitator-client flow"(url, network, privateKey, stack) {
    const official = new Facilitator({ network: network === "cronos-testnet" ? CronosNetwork.CronosTestnet : CronosNetwork.CronosMainnet });
    const signer = new ethers.Wallet(privateKey, new ethers.JsonRpcProvider(stack.networks[network]!.rpcUrl));
    // The client asks the 402 for nothing: it is told whom to pay and how much, as its docs show.
    const header = await official.generatePaymentHeader({ to: stack.seller, value: PRICE.toString(), signer: signer as never });
    const response = await fetch(url, { headers: { "X-PAYMENT": header } });
    const settlement = getPaymentResponse(response);
    return {
      status: response.status,
      body: await response.json(),
      txHash: settlement?.event === "payment.settled" ? settlement.txHash : "",
      responseHeader: "X-PAYMENT-RESPONSE",
    };
  },
};

describe("compatibility matrix: every seller × buyer pays end to end through this facilitator (local chains 338 and 25, the real packages)", function () {
  let stack: LocalStack;
  let proxy: FacilitatorProxy;
  let kitSeller: TestSeller;
  let expressSeller: Listening;

  before(async () => {
    stack = await startTestStack(STACK_OPTIONS);
    // The kit seller reaches the facilitator through a recording proxy, to see which dialect it spoke.
    proxy = await startFacilitatorProxy(stack.facilitatorUrl);
    kitSeller = await startSeller(proxy.url, stack.seller);
    expressSeller = await listen(x402Seller(stack.facilitatorUrl, stack.seller));
  });
  after(async () => {
    await expressSeller?.close();
    await kitSeller?.close();
    await proxy?.close();
    await stack?.stop();
  });
  beforeEach(() => proxy.reset());

  const sellers: Record<SellerName, { url: (network: NetworkName) => string; content: (network: NetworkName) => unknown }> = {
    "kit seller middleware": {
      url: (network) => `${kitSeller.url}${kitSeller.routes[network === "cronos-testnet" ? "testnet" : "mainnet"]}`,
      content: (network) => content(kitSeller.routes[network === "cronos-testnet" ? "testnet" : "mainnet"]),
    },
    "@x402/express paymentMiddleware": {
      url: () => `${expressSeller.url}/weather`,
      content: () => ({ forecast: "sunny" }),
    },
  };

  for (const network of ["cronos-testnet", "cronos-mainnet"] as const) {
    for (const sellerName of Object.keys(sellers) as SellerName[]) {
      for (const buyerName of Object.keys(BUYERS) as BuyerName[]) {
        // The official client cannot read a 402: it pays a seller that takes X-PAYMENT, i.e. the kit's.
        if (buyerName === "@crypto.com/facilitator-client flow" && sellerName !== "kit seller middleware") continue;

        it(`${sellerName} × ${buyerName} on ${network} (${CAIP2[network]})`, async () => {
          const info = stack.networks[network]!;
          const { privateKey, address } = info.buyers[0]!;
          const seller = sellers[sellerName];
          const before = await partyBalances(stack, network, address as Address);

          const paid = await BUYERS[buyerName](seller.url(network), network, privateKey, stack);
          expect(paid.status, JSON.stringify(paid.body)).to.equal(200);
          expect(paid.txHash).to.match(TX_HASH);
          await expectPaidOnChain(stack, network, paid.txHash, { buyer: address, price: PRICE, before });

          if (sellerName === "kit seller middleware") {
            // The kit seller answers in the buyer's dialect and asks the facilitator in the same one.
            const v2 = buyerName === "@x402/fetch" || buyerName === "@x402/axios";
            expect(paid.responseHeader).to.equal(v2 ? "PAYMENT-RESPONSE" : "X-PAYMENT-RESPONSE");
            expect(proxy.calls.map((call) => [call.path, (call.body as { x402Version: number }).x402Version])).to.deep.equal([
              ["/v2/x402/verify", v2 ? 2 : 1],
              ["/v2/x402/settle", v2 ? 2 : 1],
            ]);
            const payment = { txHash: paid.txHash, from: address, to: stack.seller, value: PRICE.toString() };
            expect(paid.body).to.deep.include({ ...(seller.content(network) as object) });
            expect((paid.body as { payment: object }).payment).to.deep.include(payment);
          } else {
            expect(paid.responseHeader).to.equal("PAYMENT-RESPONSE");
            expect(paid.body).to.deep.equal(seller.content(network));
          }
        });
      }
    }
  }
});
