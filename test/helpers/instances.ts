import { privateKeyToAccount } from "viem/accounts";
import type { Address } from "viem";
import type { LocalChain } from "../../src/harness/chain.js";
import { CLUSTER_RELAYER_KEYS, type FacilitatorProcess } from "../../src/harness/cluster.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { makePayment } from "./facilitator.js";
import { fetchJson, type JsonAnswer } from "./http.js";

// Helpers only: importing this file runs nothing.

const RELAYER_ADDRESSES: Address[] = CLUSTER_RELAYER_KEYS.map((key) => privateKeyToAccount(key).address);

/**
 * A client address for `X-Forwarded-For`: the instances run as if behind one balancer on loopback
 * (`TRUST_PROXY=loopback`), so each test request comes from a client of its own unless a test names one.
 */
const someClient = () => `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 254)}`;

/** POSTs a JSON body from client `ip`; resolves with status and parsed body (a dropped connection rejects). */
export function post(url: string, path: string, body: unknown, ip = someClient()): Promise<JsonAnswer> {
  return fetchJson(`${url}${path}`, { body, headers: { "X402-Version": "1", "X-Forwarded-For": ip } });
}

/** GETs a JSON answer from client `ip`. */
export function get(url: string, path: string, ip = someClient()): Promise<JsonAnswer> {
  return fetchJson(`${url}${path}`, { headers: { "X-Forwarded-For": ip } });
}

/** A signed payment by one of the chain's buyers to `payTo`. */
export function paymentOn(chain: LocalChain, buyer: number, payTo: Address, amount = 1_000_000n) {
  return makePayment(
    { publicClient: chain.publicClient, info: NETWORKS[chain.network], token: chain.token },
    { payer: privateKeyToAccount(chain.buyers[buyer]!.privateKey), payTo, amount },
  );
}

/** The relayer keys' confirmed transaction counts, summed. */
export async function relayerNonces(chain: LocalChain): Promise<number> {
  const counts = await Promise.all(RELAYER_ADDRESSES.map((address) => chain.publicClient.getTransactionCount({ address, blockTag: "latest" })));
  return counts.reduce((a, b) => a + b, 0);
}

/**
 * Settings for instances under test: behind one balancer named by address (each test request names its
 * client; the balancer's connections are not capped per client), no limits but those a test sets, quick
 * polls, and leases and reconciler rounds of seconds, not tens.
 */
export const QUICK: Record<string, string> = {
  TRUST_PROXY: "loopback",
  RATE_LIMIT_VERIFY_PER_MINUTE: "0",
  RATE_LIMIT_SETTLE_PER_MINUTE: "0",
  RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
  RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
  POLLING_INTERVAL_MS: "100",
  HEAD_CACHE_MS: "0",
  LEDGER_LEASE_TTL_SECONDS: "3",
  RECONCILE_INTERVAL_MS: "500",
};

/** What {@link watchForExits} returns. */
export interface ExitWatch {
  /** Rejects as soon as a watched instance exits: which one, its exit code or signal, and its stderr (the crash's stack). */
  crashed: Promise<never>;
  /** The instances are about to be stopped on purpose: their exits are no longer crashes. */
  done(): void;
}

/**
 * Watches `instances` for an exit nobody asked for. A test races its body against `crashed`
 * (`Promise.race([body(), watch.crashed])`), so an instance that dies fails it at once, naming the
 * crash, instead of showing up later as a time-out of whatever the test was waiting for.
 */
export function watchForExits(instances: readonly FacilitatorProcess[]): ExitWatch {
  let done = false;
  let fail!: (error: Error) => void;
  const crashed = new Promise<never>((_, reject) => (fail = reject));
  // Nobody may be racing it when an instance exits: that must not be an unhandled rejection.
  crashed.catch(() => {});
  for (const [n, instance] of instances.entries()) {
    const report = () => {
      if (done) return;
      const { exitCode, signalCode } = instance.child;
      fail(new Error(`facilitator instance ${n} exited during the test (code ${exitCode}, signal ${signalCode}); its stderr:\n${instance.stderr()}`));
    };
    // 'close' comes after 'exit' once its output is read to the end: the stderr then holds the whole stack.
    if (instance.child.exitCode !== null || instance.child.signalCode !== null) report();
    else instance.child.once("close", report);
  }
  return { crashed, done: () => void (done = true) };
}
