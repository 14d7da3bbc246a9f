// The chain's metrics: RPC faults and endpoints, settle confirmations and reverts, the relayers (events, fees, nonce gaps, balances).
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { NetworkName } from "../../protocol/networks.js";
import type { NetworkRuntime } from "../../settlement/runtime.js";
import { memoizeFor } from "../memoize.js";
import type { CreateMetricsOptions, FacilitatorMetrics } from "./types.js";
import { networkGauge } from "./series.js";

/** One relayer as the gauges show it; a value the RPC did not give is absent. */
export interface RelayerReading {
  network: NetworkName;
  relayer: string;
  nonceGap?: number;
  balanceWei?: number;
}

/** The chain area's metrics on `registry`; `runtimes()` gives the networks {@link FacilitatorMetrics.watchRelayers} was handed. */
export function chainMetrics(
  registry: Registry,
  options: CreateMetricsOptions,
): Pick<FacilitatorMetrics, "rpcError" | "confirmationWait" | "revertedGas" | "watchRelayers" | "rpcEndpointUp" | "relayerEvent"> & {
  runtimes(): ReadonlyMap<NetworkName, NetworkRuntime>;
  /** Every relayer's nonce gap and balance, read at most once per `cacheMs` (shared by every gauge that needs them). */
  readings(): Promise<RelayerReading[]>;
} {
  const confirmations = new Histogram({
    name: "x402_settle_confirmation_seconds",
    help: "time from sending a settle transaction to its confirmed receipt",
    labelNames: ["network"],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  const rpcErrors = new Counter({ name: "x402_rpc_errors_total", help: "RPC faults by network", labelNames: ["network"], registers: [registry] });
  const reverted = new Counter({
    name: "x402_settle_reverted_gas_total",
    help: "gas the relayer paid for settlements that reverted on chain",
    labelNames: ["network"],
    registers: [registry],
  });
  const replacements = new Counter({
    name: "x402_relayer_replacements_total",
    help: "transactions sent again at the same nonce with higher fees (not mined within REPLACE_AFTER_SECONDS)",
    labelNames: ["network"],
    registers: [registry],
  });
  const drops = new Counter({
    name: "x402_relayer_drops_detected_total",
    help: "transactions a node took anew when broadcast again before they were mined (dropped, a node that lost its pool, a backend that never got them)",
    labelNames: ["network"],
    registers: [registry],
  });
  const rebroadcasts = new Counter({
    name: "x402_relayer_rebroadcasts_total",
    help: "dropped transactions broadcast again as signed",
    labelNames: ["network"],
    registers: [registry],
  });
  const gaps = new Counter({
    name: "x402_relayer_nonce_gaps_filled_total",
    help: "missing nonces below waiting transactions, filled by the missing transaction (resend) or a zero-value self-transfer",
    labelNames: ["network", "by"],
    registers: [registry],
  });
  const capped = new Counter({
    name: "x402_relayer_replacements_capped_total",
    help: "replacements withheld because the network needed more than MAX_FEE_PER_GAS_GWEI (the transaction kept its price)",
    labelNames: ["network"],
    registers: [registry],
  });
  const refusals = new Counter({
    name: "x402_relayer_refusals_total",
    help: "broadcasts a node refused, by what the refusal means (nonceBehind, nonceAhead, replacementRefused, feeTooLow, poolFull, fundsLow, invalid): nothing of them was sent",
    labelNames: ["network", "refusal"],
    registers: [registry],
  });
  const adopted = new Counter({
    name: "x402_relayer_nonces_adopted_total",
    help: "times a relayer key took the nonce a node said it expects, in place of its own",
    labelNames: ["network"],
    registers: [registry],
  });
  const taken = new Counter({
    name: "x402_relayer_nonces_taken_total",
    help: "nonces of a relayer key mined by a transaction the relayer did not send there (the key used elsewhere)",
    labelNames: ["network"],
    registers: [registry],
  });
  let runtimes: ReadonlyMap<NetworkName, NetworkRuntime> = new Map();
  const feeGauge = (name: string, help: string, value: (fees: ReturnType<NetworkRuntime["relayer"]["feeStatus"]>) => bigint | undefined) =>
    networkGauge(registry, () => runtimes, name, help, (runtime) => value(runtime.relayer.feeStatus()));
  feeGauge("x402_network_fee_per_gas_wei", "what the network asked per gas at the relayer's last fee quote (base fee plus tip, or the gas price)", (fees) => fees.neededWei);
  feeGauge("x402_max_fee_per_gas_wei", "MAX_FEE_PER_GAS_GWEI in wei: nothing is sent above it", (fees) => fees.capWei);
  feeGauge(
    "x402_fee_cap_exceeded",
    "1 while the network asked more per gas than MAX_FEE_PER_GAS_GWEI at the relayer's last fee quote (settles are answered 503 with nothing sent, replacements withheld), else 0",
    (fees) => (fees.neededWei === undefined ? undefined : fees.capWei !== undefined && fees.neededWei > fees.capWei ? 1n : 0n),
  );
  const endpointUp = new Gauge({
    name: "x402_rpc_endpoint_up",
    help: "with several RPC URLs per network: 1 when the URL answered its last ranking ping, else 0",
    labelNames: ["network", "endpoint"],
    registers: [registry],
  });
  const endpointDown = new Counter({
    name: "x402_rpc_endpoint_down_total",
    help: "with several RPC URLs per network: times the URL stopped answering its ranking pings (its first ping failing counts too); requests go to the other URLs meanwhile (failover)",
    labelNames: ["network", "endpoint"],
    registers: [registry],
  });
  // The last ping's answer per URL (the configured URLs only: bounded by the configuration).
  const endpointState = new Map<string, boolean>();
  // Every scrape within cacheMs shares one read of every relayer (a scrape flood is no RPC flood).
  const readRelayers = memoizeFor(
    options.cacheMs ?? 5_000,
    () =>
      Promise.all(
        [...runtimes.values()].flatMap((runtime) =>
          runtime.relayer.status().map(async ({ address, localNonce }): Promise<RelayerReading> => {
            const network = runtime.config.network;
            const reading: RelayerReading = { network, relayer: address };
            const [nonce, balance] = await Promise.allSettled([
              localNonce === undefined ? Promise.resolve(undefined) : runtime.client.getTransactionCount({ address, blockTag: "latest" }),
              runtime.client.getBalance({ address }),
            ]);
            if (nonce.status === "fulfilled" && nonce.value !== undefined) reading.nonceGap = localNonce! - nonce.value;
            if (balance.status === "fulfilled") reading.balanceWei = Number(balance.value);
            if (nonce.status === "rejected" || balance.status === "rejected") rpcErrors.inc({ network });
            return reading;
          }),
        ),
      ),
    options.now,
  );
  const relayerGauge = (name: string, help: string, value: (reading: RelayerReading) => number | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ["network", "relayer"],
      registers: [registry],
      async collect() {
        this.reset();
        for (const reading of await readRelayers()) {
          const v = value(reading);
          if (v !== undefined) this.set({ network: reading.network, relayer: reading.relayer }, v);
        }
      },
    });
  relayerGauge(
    "x402_relayer_nonce_gap",
    "relayer transactions handed a nonce but not yet mined (local next nonce - chain latest nonce)",
    (reading) => reading.nonceGap,
  );
  relayerGauge("x402_relayer_balance_wei", "relayer native gas balance", (reading) => reading.balanceWei);
  return {
    runtimes: () => runtimes,
    readings: readRelayers,
    rpcError(network) {
      rpcErrors.inc({ network });
    },
    confirmationWait(network, seconds) {
      confirmations.observe({ network }, seconds);
    },
    revertedGas(network, gas) {
      reverted.inc({ network }, Number(gas));
    },
    watchRelayers(networks) {
      runtimes = networks;
      // The counters alerts read start at 0 for each network: an increase() sees the first event.
      for (const network of networks.keys()) for (const counter of [rpcErrors, reverted, replacements, drops, rebroadcasts, capped]) counter.inc({ network }, 0);
    },
    rpcEndpointUp(network, endpoint, up) {
      endpointUp.set({ network, endpoint }, up ? 1 : 0);
      const key = `${network}\u0000${endpoint}`;
      const was = endpointState.get(key);
      endpointState.set(key, up);
      endpointDown.inc({ network, endpoint }, !up && was !== false ? 1 : 0);
    },
    relayerEvent(network, event) {
      if (event.kind === "replaced") replacements.inc({ network });
      else if (event.kind === "dropped") drops.inc({ network });
      else if (event.kind === "rebroadcast") rebroadcasts.inc({ network });
      else if (event.kind === "gapFilled") gaps.inc({ network, by: event.by === "resend" ? "resend" : "self-transfer" });
      else if (event.kind === "capped") capped.inc({ network });
      else if (event.kind === "refused") refusals.inc({ network, refusal: event.refusal });
      else if (event.kind === "nonceAdopted") adopted.inc({ network });
      else if (event.kind === "nonceTaken") taken.inc({ network });
      else rpcErrors.inc({ network });
    },
  };
}
