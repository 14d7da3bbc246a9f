import type { Address } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../buyer/sign.js";
import { tokenAbi } from "../chain/token-abi.js";
import type { DashboardPlayground, PlaygroundBuyer, TryRequest, TryStep } from "../facilitator/dashboard/playground.js";
import { EXACT_SCHEME } from "../protocol/reasons.js";
import type { PaymentRequirementsInput } from "../protocol/schemas.js";
import { NETWORK_NAMES, type NetworkName } from "../protocol/networks.js";
import { createFacilitatorClient } from "../seller/facilitator-client.js";
import type { LocalChain } from "./chain.js";

/** Options of {@link createPlayground}. */
export interface PlaygroundOptions {
  chains: Partial<Record<NetworkName, LocalChain>>;
  /** Who the try-it payments go to (the stack's seller). */
  payTo: Address;
  /** The facilitator's URL, known once it listens. */
  facilitatorUrl: () => string;
}

/** How much more than the buyer signed the "wrong amount" refusal asks for: 0.01 USDC.e. */
const WRONG_AMOUNT_EXTRA = 10_000n;

/**
 * The local stack's extras for the dashboard: its buyers with live balances and their LOCAL-ONLY
 * keys, and a try-it flow that signs as a buyer and pays the facilitator over HTTP as a seller
 * would (verify, then settle when valid), so each payment shows in the feed like any other.
 */
export function createPlayground(options: PlaygroundOptions): DashboardPlayground {
  const chains = NETWORK_NAMES.flatMap((network) => options.chains[network] ?? []);
  // The last payment each buyer made from the panel: what "replay" sends again.
  const lastPaid = new Map<string, { paymentHeader: string; paymentRequirements: PaymentRequirementsInput }>();

  const chainOf = (network: NetworkName): LocalChain => {
    const chain = options.chains[network];
    if (!chain) throw new Error(`${network} is not running in this stack`);
    return chain;
  };

  /** Verify, then settle when valid: the seller's flow. */
  async function send(paymentHeader: string, paymentRequirements: PaymentRequirementsInput): Promise<TryStep[]> {
    const client = createFacilitatorClient({ url: options.facilitatorUrl() });
    const verify = await client.verify({ paymentHeader, paymentRequirements });
    if (!verify.isValid) return [{ route: "verify", answer: verify }];
    return [
      { route: "verify", answer: verify },
      { route: "settle", answer: await client.settle({ paymentHeader, paymentRequirements }) },
    ];
  }

  async function pay(request: TryRequest): Promise<TryStep[]> {
    const chain = chainOf(request.network);
    const buyer = chain.buyers.find((b) => b.address === request.buyer);
    if (!buyer) throw new Error(`${request.buyer} is not a funded buyer of ${request.network}`);
    const key = `${request.network}:${buyer.address}`;

    if (request.scenario === "replay") {
      const steps: TryStep[] = [];
      if (!lastPaid.has(key)) steps.push(...(await pay({ ...request, scenario: "pay" })));
      const last = lastPaid.get(key);
      if (!last) return steps;
      return [...steps, ...(await send(last.paymentHeader, last.paymentRequirements))];
    }

    const requirements: PaymentRequirementsInput = {
      scheme: EXACT_SCHEME,
      network: request.network,
      payTo: options.payTo,
      asset: chain.token,
      maxAmountRequired: request.amount.toString(),
      maxTimeoutSeconds: 300,
      description: "dashboard try-it payment",
      mimeType: "application/json",
    };
    // The chain's clock, not this machine's: a test may have moved it.
    const head = await chain.publicClient.getBlock({ blockTag: "latest" });
    const paymentHeader = await createPaymentHeader({
      signer: privateKeyToAccount(buyer.privateKey),
      requirements,
      chainId: chain.chainId,
      domain: chain.domain,
      now: Number(head.timestamp),
      ...(request.scenario === "expired" ? { validBefore: head.timestamp - 60n } : {}),
    });
    // "wrong amount": the seller asks for more than the buyer signed.
    const asked =
      request.scenario === "wrongAmount" ? { ...requirements, maxAmountRequired: (request.amount + WRONG_AMOUNT_EXTRA).toString() } : requirements;
    const steps = await send(paymentHeader, asked);
    const settled = steps.find((step) => step.route === "settle" && step.answer.event === "payment.settled");
    if (request.scenario === "pay" && settled) lastPaid.set(key, { paymentHeader, paymentRequirements: requirements });
    return steps;
  }

  return {
    rpcUrls: Object.fromEntries(chains.map((chain) => [chain.network, chain.rpcUrl])),
    async buyers(): Promise<PlaygroundBuyer[]> {
      const rows = chains.flatMap((chain) => chain.buyers.map((buyer) => ({ chain, buyer })));
      return Promise.all(
        rows.map(async ({ chain, buyer }) => ({
          network: chain.network,
          address: buyer.address,
          privateKey: buyer.privateKey,
          balance: (
            await chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "balanceOf", args: [buyer.address] })
          ).toString(),
        })),
      );
    },
    pay,
  };
}
