// Helpers of every area: memoized label sets, and gauges per network read from the runtimes when scraped.
import { Gauge, type Registry } from "prom-client";
import type { NetworkName } from "../../protocol/networks.js";
import type { NetworkRuntime } from "../../settlement/runtime.js";

/** Label sets kept at most per metric: every label is bounded already; this bounds the memo itself. */
const MAX_SERIES = 1_000;

/** `create`'s answer per label values, memoized (up to {@link MAX_SERIES} sets, then created afresh each time). */
export function seriesOf<A extends Array<string | number>, S>(create: (...labels: A) => S): (...labels: A) => S {
  const known = new Map<string, S>();
  return (...labels) => {
    const key = labels.join("\u0000");
    let series = known.get(key);
    if (series === undefined) {
      series = create(...labels);
      if (known.size < MAX_SERIES) known.set(key, series);
    }
    return series;
  };
}

/** A gauge per network, read from the runtimes (memory, no RPC) when scraped; a network without a value is left out. */
export function networkGauge(
  registry: Registry,
  runtimes: () => ReadonlyMap<NetworkName, NetworkRuntime>,
  name: string,
  help: string,
  value: (runtime: NetworkRuntime) => bigint | number | undefined,
): Gauge {
  return new Gauge({
    name,
    help,
    labelNames: ["network"],
    registers: [registry],
    collect() {
      this.reset();
      for (const runtime of runtimes().values()) {
        const v = value(runtime);
        if (v !== undefined) this.set({ network: runtime.config.network }, Number(v));
      }
    },
  });
}
