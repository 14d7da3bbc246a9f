// What one settle costs the relayer now, and how many settles each relayer's balance still pays for.
import { Gauge, type Registry } from "prom-client";
import { isAddressEqual, type Hex } from "viem";
import type { NetworkName } from "../../protocol/networks.js";
import { networkOfAnyForm } from "../../protocol/x402v2.js";
import type { NetworkRuntime } from "../../settlement/runtime.js";
import type { OutcomeRecord } from "../http/app.js";
import { memoizeFor } from "../memoize.js";
import type { RelayerReading } from "./chain.js";
import type { CreateMetricsOptions } from "./types.js";

/**
 * The gas a settle is taken to use until the receipt of one is read: an EOA payer paying a payee that never
 * held the token used 97,168 gas on the kit's token (docs/benchmarks.md, "Relayer safety"), rounded up.
 */
export const SETTLE_GAS_BEFORE_FIRST = 100_000n;

/** A network's settle cost as last worked out. */
interface SettleCost {
  network: NetworkName;
  gas: bigint;
  /** Wei per gas: the relayer's last fee quote, else the node's gas price; undefined when neither answered. */
  feePerGas?: bigint;
}

/**
 * `x402_settle_gas`, `x402_settle_cost_wei` and `x402_relayer_runway_settles`. The gas is the latest settle's
 * (its receipt read when `/metrics` is scraped, at most once per `cacheMs` and only for a new settle of our
 * relayers': never on the settle's own path), {@link SETTLE_GAS_BEFORE_FIRST} before one; the price per gas
 * the relayer's last fee quote (memory), or the node's gas price while the relayer has quoted none.
 */
export function runwayMetrics(
  registry: Registry,
  options: CreateMetricsOptions,
  runtimes: () => ReadonlyMap<NetworkName, NetworkRuntime>,
  readings: () => Promise<RelayerReading[]>,
): { settled(record: OutcomeRecord): void } {
  /** Per network: the latest settled transaction answered, the latest whose receipt was read, and the gas learned. */
  const latest = new Map<NetworkName, Hex>();
  const read = new Map<NetworkName, Hex>();
  const learned = new Map<NetworkName, bigint>();
  const costs = memoizeFor(
    options.cacheMs ?? 5_000,
    () =>
      Promise.all(
        [...runtimes().values()].map(async (runtime): Promise<SettleCost> => {
          const network = runtime.config.network;
          const txHash = latest.get(network);
          if (txHash && read.get(network) !== txHash) {
            const receipt = await runtime.client.getTransactionReceipt({ hash: txHash }).catch(() => undefined);
            if (receipt) read.set(network, txHash);
            // A copy of our transaction that someone else sent first paid the payment: its gas says nothing of ours.
            if (receipt && runtime.relayer.addresses.some((address) => isAddressEqual(address, receipt.from))) learned.set(network, receipt.gasUsed);
          }
          const feePerGas = runtime.relayer.feeStatus().neededWei ?? (await runtime.client.getGasPrice().catch(() => undefined));
          return { network, gas: learned.get(network) ?? SETTLE_GAS_BEFORE_FIRST, ...(feePerGas !== undefined ? { feePerGas } : {}) };
        }),
      ),
    options.now,
  );
  const perNetwork = (name: string, help: string, value: (cost: SettleCost) => bigint | undefined) =>
    new Gauge({
      name,
      help,
      labelNames: ["network"],
      registers: [registry],
      async collect() {
        this.reset();
        for (const cost of await costs()) {
          const v = value(cost);
          if (v !== undefined) this.set({ network: cost.network }, Number(v));
        }
      },
    });
  perNetwork("x402_settle_gas", "gas one settle is taken to use: the latest settle transaction's, 100000 before one is seen", (cost) => cost.gas);
  perNetwork("x402_settle_cost_wei", "what one settle costs the relayer at the network's current fee per gas (x402_settle_gas times the last fee quote)", (cost) =>
    cost.feePerGas === undefined ? undefined : cost.gas * cost.feePerGas,
  );
  new Gauge({
    name: "x402_relayer_runway_settles",
    help: "settles the relayer's balance still pays for at x402_settle_cost_wei (absent while the balance or the fee is unknown)",
    labelNames: ["network", "relayer"],
    registers: [registry],
    async collect() {
      this.reset();
      const [read, known] = await Promise.all([readings(), costs()]);
      for (const reading of read) {
        const cost = known.find((c) => c.network === reading.network);
        if (reading.balanceWei === undefined || cost?.feePerGas === undefined || cost.feePerGas === 0n) continue;
        this.set({ network: reading.network, relayer: reading.relayer }, Math.floor(reading.balanceWei / Number(cost.gas * cost.feePerGas)));
      }
    },
  });
  return {
    settled(record) {
      if (record.route !== "settle" || record.code !== "settled" || !record.txHash) return;
      const network = networkOfAnyForm(record.network);
      if (network && runtimes().has(network)) latest.set(network, record.txHash as Hex);
    },
  };
}
