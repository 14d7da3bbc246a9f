// The dashboard's charts: each network's last hour, minute by minute, from GET dashboard/api/charts (the
// server keeps the hour; the page asks again when the live feed shows a new outcome, and every 15 s as the
// minutes roll). Drawn with uPlot, served from this origin (dashboard/vendor/uplot.js). Every value is
// written with textContent, never parsed as HTML.

/** How often the hour is read again without traffic (the window moves on each minute). */
const REFRESH_MS = 15_000;
/** After an outcome in the live feed, the hour is read again within this long (at most once per it). */
const SOON_MS = 1_000;

/** Each network's charts by name: the uPlot instances, for tools and tests (`dashboardCharts.get(network).counts.data`). */
export const charts = new Map();
globalThis.dashboardCharts = charts;

const $ = (id) => document.getElementById(id);
let shape = "";
let soon;

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "className") node.className = value;
    else node.setAttribute(name, String(value));
  }
  node.append(...children);
  return node;
}

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();
const sum = (values) => values.reduce((total, value) => total + (value ?? 0), 0);
const last = (values) => [...values].reverse().find((value) => value !== null && value !== undefined);
const whole = (value) => Math.round(value).toLocaleString("en-US");
const cro = (value) => (value === null || value === undefined ? "—" : value.toLocaleString("en-US", { maximumSignificantDigits: 6 }));
/** Axis numbers: 1.2k, 3.4M; small ones as they are. */
function compact(value) {
  if (value === null || value === undefined) return "";
  const size = Math.abs(value);
  if (size >= 1e6) return `${+(value / 1e6).toFixed(1)}M`;
  if (size >= 1e3) return `${+(value / 1e3).toFixed(1)}k`;
  return size > 0 && size < 1 ? `${+value.toPrecision(2)}` : `${+value.toFixed(1)}`;
}

/** The charts of one network: what each draws, from the hour's series. */
function definitions(series, scope) {
  const colors = [1, 2, 3, 4, 5].map((i) => css(`--chart-${i}`));
  // A point where there is something to see (not at every empty minute); the line joins them.
  const filter = (u, index) => u.data[index].flatMap((value, i) => (value ? [i] : []));
  const line = (label, color, extra = {}) => ({ label, stroke: color, width: 2, points: { show: true, size: 6, fill: color, filter }, ...extra });
  const faults = series.settle.fault && series.settle.fault.map((value, i) => value + series.verify.fault[i]);
  const list = [
    {
      key: "counts",
      title: "Verifies and settles per minute",
      lines: scope === "all"
        ? [line("verify ✓", colors[0]), line("verify refused", colors[1], { dash: [6, 4] }), line("settle ✓", colors[2]), line("settle refused", colors[3], { dash: [6, 4] }), line("faults (5xx)", colors[4], { dash: [2, 3] })]
        : [line("settle ✓", colors[2])],
      data: scope === "all" ? [series.verify.ok, series.verify.refused, series.settle.ok, series.settle.refused, faults] : [series.settle.ok],
      summary: () =>
        scope === "all"
          ? `Last hour: ${whole(sum(series.verify.ok))} verified, ${whole(sum(series.verify.refused))} refused; ${whole(sum(series.settle.ok))} settled, ${whole(sum(series.settle.refused))} refused; ${whole(sum(faults))} faults.`
          : `Last hour: ${whole(sum(series.settle.ok))} settled. Verifies, refusals and latency are shown with an API key only.`,
    },
  ];
  if (scope === "all") {
    list.push({
      key: "latency",
      title: "Latency p50 and p99 (ms)",
      log: true,
      lines: [line("verify p50", colors[0]), line("verify p99", colors[0], { dash: [6, 4] }), line("settle p50", colors[2]), line("settle p99", colors[2], { dash: [6, 4] })],
      data: [series.verify.p50, series.verify.p99, series.settle.p50, series.settle.p99],
      summary: () => {
        const part = (route) => (last(series[route].p50) === undefined ? `${route}: none this hour` : `${route} p50 ${last(series[route].p50)} ms, p99 ${last(series[route].p99)} ms`);
        return `Latest minute with answers: ${part("verify")}; ${part("settle")}.`;
      },
    });
  }
  list.push(
    {
      key: "gas",
      title: "Gas spent per minute",
      right: "CRO",
      lines: [line("gas used", colors[3]), line("CRO", colors[1], { scale: "right", dash: [6, 4] })],
      data: [series.gasUsed, series.feeCro],
      summary: () => `Last hour: ${whole(sum(series.gasUsed))} gas, ${cro(sum(series.feeCro))} CRO, by the relayer's settle transactions.`,
    },
    {
      key: "balance",
      title: "Relayer balance (CRO) and runway (settles)",
      right: "settles",
      lines: [line("balance (CRO)", colors[0]), line("runway (settles)", colors[2], { scale: "right", dash: [6, 4] })],
      data: [series.balanceCro, series.runwaySettles],
      summary: () => {
        const balance = last(series.balanceCro);
        if (balance === undefined) return "Balance not read yet.";
        const runway = last(series.runwaySettles);
        return runway === undefined
          ? `Balance ${cro(balance)} CRO; runway unknown until a settle's cost is seen.`
          : `Balance ${cro(balance)} CRO: about ${whole(runway)} settles at ${cro(series.feePerSettleCro)} CRO each (the hour's average).`;
      },
    },
  );
  return list;
}

function options(definition, width) {
  const fg = css("--fg");
  const grid = { stroke: css("--line"), width: 1 };
  // Each axis as wide as its longest label.
  const size = (_u, values) => 16 + 7.5 * Math.max(2, ...(values ?? []).map((value) => String(value).length));
  const axis = (scale, side) => ({ scale, side, stroke: fg, grid: side === 1 ? { show: false } : grid, ticks: grid, size, values: (_u, values) => values.map(compact) });
  const scales = { x: { time: true }, y: definition.log ? { distr: 3 } : { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } };
  const axes = [{ stroke: fg, grid, ticks: grid }, axis("y", 3)];
  if (definition.right) {
    scales.right = { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] };
    axes.push(axis("right", 1));
  }
  return {
    width,
    height: width < 480 ? 170 : 200,
    scales,
    axes,
    series: [{}, ...definition.lines.map((line) => ({ scale: "y", ...line }))],
    legend: { live: false },
    cursor: { drag: { x: false, y: false } },
  };
}

function figure(definition) {
  const summary = el("span", { className: "chart-summary" });
  const plot = el("div", { className: "chart-plot", "aria-hidden": "true" });
  const root = el("figure", { className: "chart", "data-chart": definition.key }, el("figcaption", {}, el("b", {}, definition.title), " ", summary), plot);
  return { root, plot, summary };
}

/** Builds every network's charts (when the networks or the scope changed) or gives them the new hour. */
function render(view) {
  const list = $("chart-list");
  const now = `${view.scope}:${view.networks.map((n) => n.network).join(",")}`;
  if (now !== shape) {
    for (const network of charts.values()) {
      for (const chart of Object.values(network)) {
        chart.observer.disconnect();
        chart.destroy();
      }
    }
    charts.clear();
    list.replaceChildren();
    for (const series of view.networks) {
      const instances = {};
      const grid = el("div", { className: "chart-grid" });
      list.append(el("article", { className: "chart-net", "data-network": series.network, "aria-labelledby": `charts-${series.network}` }, el("h3", { id: `charts-${series.network}` }, series.network), grid));
      for (const definition of definitions(series, view.scope)) {
        const parts = figure(definition);
        grid.append(parts.root);
        const chart = new globalThis.uPlot(options(definition, Math.max(200, parts.plot.clientWidth)), [view.minutes, ...definition.data], parts.plot);
        chart.summaryNode = parts.summary;
        instances[definition.key] = chart;
        // The chart follows its box: a phone turned, a window resized.
        chart.observer = new ResizeObserver(() => {
          const width = Math.max(200, parts.plot.clientWidth);
          if (width !== chart.width) chart.setSize({ width, height: width < 480 ? 170 : 200 });
        });
        chart.observer.observe(parts.plot);
      }
      charts.set(series.network, instances);
    }
    shape = now;
  }
  for (const series of view.networks) {
    const instances = charts.get(series.network);
    for (const definition of definitions(series, view.scope)) {
      const chart = instances[definition.key];
      chart.setData([view.minutes, ...definition.data]);
      const text = definition.summary();
      if (chart.summaryNode.textContent !== text) chart.summaryNode.textContent = text;
    }
  }
  $("charts-status").textContent = "";
}

async function refresh() {
  try {
    const response = await fetch("dashboard/api/charts", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    render(await response.json());
  } catch (error) {
    $("charts-status").textContent = `Cannot read the last hour: ${error.message}`;
  }
}

/** A new outcome was shown: the hour is read again shortly (once for a burst of them). */
export function chartsSoon() {
  soon ??= setTimeout(() => {
    soon = undefined;
    refresh();
  }, SOON_MS);
}

export function startCharts() {
  if (!globalThis.uPlot) {
    $("charts-status").textContent = "The charting library did not load.";
    return;
  }
  refresh();
  setInterval(refresh, REFRESH_MS);
}
