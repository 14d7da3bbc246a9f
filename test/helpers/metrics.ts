// Helpers only: importing this file runs nothing.

/** One series' value in a Prometheus text page (0 when absent), e.g. `x402_http_connections{listener="service",state="served"}`. */
export function metric(page: string, series: string): number {
  const found = page.split("\n").find((line) => line.startsWith(`${series} `));
  return found ? Number(found.slice(series.length + 1)) : 0;
}

/** One series' value as the metrics listener at `metricsUrl` (`…/metrics`) serves it now. */
export async function scrapeMetric(metricsUrl: string, series: string): Promise<number> {
  return metric(await (await fetch(metricsUrl)).text(), series);
}
