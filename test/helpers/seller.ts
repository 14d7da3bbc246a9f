import express from "express";
import type { Address } from "viem";
import { startLocalStack, type LocalStack, type LocalStackOptions } from "../../src/harness/stack.js";
import type { PaymentRequirements } from "../../src/protocol/schemas.js";
import { paymentRequirements, requirePayment, type RequirePaymentOptions } from "../../src/seller/index.js";
import { startFacilitatorProxy, type FacilitatorProxy } from "./facilitator-proxy.js";
import { listen, type Listening } from "./http.js";
import { closeAfter } from "./teardown.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).
// The end-to-end environment: a local stack, a recording proxy in front of its facilitator, and a test seller.

/** One stack per e2e file: every port ephemeral, rate limits off. */
export const STACK_OPTIONS = {
  port: 0,
  rpcPorts: { "cronos-testnet": 0, "cronos-mainnet": 0 },
  rateLimits: { verifyPerMinute: 0, settlePerMinute: 0 },
} as const satisfies LocalStackOptions;

/** A local stack (`startLocalStack`), stopped with the scope that starts it (test/helpers/teardown.ts); its `stop` runs once. */
export async function startTestStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const stack = await startLocalStack(options);
  closeAfter("local stack", () => stack.stop());
  return stack;
}

/** Price of every paid route of the test seller: 0.01 USDC.e. */
export const PRICE = 10_000n;

/** What each paid route of the test seller answers once paid (before `payment` is merged in). */
export function content(route: string): { report: string; route: string } {
  return { report: "sunny, 21 °C", route };
}

/** A seller: an Express app with `requirePayment` routes, on an ephemeral loopback port. */
export interface TestSeller extends Listening {
  /** The requirements of each route, as the seller answers them in its 402. */
  requirements: {
    testnet: PaymentRequirements;
    mainnet: PaymentRequirements;
    /** Mainnet under the docs' alias `cronos`. */
    cronos: PaymentRequirements;
  };
  /** Paths: GET testnet, mainnet, alias; POST (header in the JSON body) on testnet. */
  routes: { testnet: string; mainnet: string; cronos: string; testnetPost: string };
}

/**
 * Starts a seller paying `payTo` {@link PRICE} on each network. The facilitator is reached at
 * `facilitatorUrl`; `options` go to every `requirePayment`.
 */
export async function startSeller(
  facilitatorUrl: string,
  payTo: Address,
  options: Omit<RequirePaymentOptions, "facilitatorUrl" | "facilitator"> = {},
): Promise<TestSeller> {
  const requirements = {
    testnet: paymentRequirements({ network: "cronos-testnet", payTo, amount: PRICE, resource: "/testnet/report" }),
    mainnet: paymentRequirements({ network: "cronos-mainnet", payTo, amount: PRICE, resource: "/mainnet/report" }),
    cronos: paymentRequirements({ network: "cronos", payTo, amount: PRICE, resource: "/cronos/report" }),
  };
  const routes = { testnet: "/testnet/report", mainnet: "/mainnet/report", cronos: "/cronos/report", testnetPost: "/testnet/report" };
  const app = express();
  const paid = (which: keyof typeof requirements) => requirePayment(requirements[which], { facilitatorUrl, timeoutMs: 20_000, ...options });
  app.get(routes.testnet, paid("testnet"), (_req, res) => void res.json(content(routes.testnet)));
  app.post(routes.testnetPost, paid("testnet"), (_req, res) => void res.json(content(`POST ${routes.testnetPost}`)));
  app.get(routes.mainnet, paid("mainnet"), (_req, res) => void res.json(content(routes.mainnet)));
  app.get(routes.cronos, paid("cronos"), (_req, res) => void res.json(content(routes.cronos)));
  const listening = await listen(app);
  return Object.assign(listening, { requirements, routes });
}

/** The seller's 402 body: `{error, x402Version, paymentRequirements, accepts, reason?}`. */
export function paymentRequiredBody(requirements: PaymentRequirements, error: string, reason?: string) {
  return {
    error,
    x402Version: 1,
    paymentRequirements: requirements,
    accepts: [requirements],
    ...(reason === undefined ? {} : { reason }),
  };
}

/** What most e2e files run against: a local stack, a recording proxy in front of its facilitator, and a seller. */
export interface SellerEnvironment {
  stack: LocalStack;
  proxy: FacilitatorProxy;
  seller: TestSeller;
}

/**
 * Registers mocha hooks (call it inside a `describe`) that start a {@link SellerEnvironment} before the
 * tests, stop it after them, and clear the proxy's records before each test. The returned object is
 * filled in once the `before` hook has run.
 */
export function useSellerEnvironment(): SellerEnvironment {
  const env = {} as SellerEnvironment;
  before(async () => {
    env.stack = await startTestStack(STACK_OPTIONS);
    env.proxy = await startFacilitatorProxy(env.stack.facilitatorUrl);
    env.seller = await startSeller(env.proxy.url, env.stack.seller);
  });
  after(async () => {
    await env.seller?.close();
    await env.proxy?.close();
    await env.stack?.stop();
  });
  beforeEach(() => env.proxy.reset());
  return env;
}
