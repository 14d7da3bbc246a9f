import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { loadConfig } from "../../src/facilitator/config/index.js";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import { HARDHAT_KEYS, makePayment, startTestFacilitator, type Chain } from "../helpers/facilitator.js";
import { openProxiedChain } from "../helpers/proxied-chain.js";
import { ROOT } from "../helpers/processes.js";
import { parseYaml, promqlRefs, seriesLabels, type Yaml } from "../helpers/promql.js";
import { waitUntil } from "../helpers/wait.js";

// The Grafana dashboard and the Prometheus alert rules the package ships (docs/monitoring/): every metric
// and label they name must exist on a live facilitator's /metrics, or a panel stays empty and an alert never fires.
const DASHBOARD_FILE = "docs/monitoring/grafana-dashboard.json";
const RULES_FILE = "docs/monitoring/prometheus-alerts.yml";

interface Panel {
  type: string;
  title: string;
  targets?: Array<{ expr: string; legendFormat?: string }>;
}

/** One PromQL expression of the files, where it is, and the labels its legend or annotations show. */
interface Query {
  where: string;
  expr: string;
  shown: string[];
}

const read = (file: string) => readFileSync(join(ROOT, file), "utf8");
const dashboard = JSON.parse(read(DASHBOARD_FILE)) as { panels: Panel[]; templating: { list: Array<{ name: string; query: { query: string } }> } };
const rules = parseYaml(read(RULES_FILE)) as { groups: Array<{ name: string; rules: Array<Record<string, Yaml>> }> };
const labelsIn = (text: string, pattern: RegExp) => [...text.matchAll(pattern)].map((match) => match[1]!);

function queries(): Query[] {
  const found: Query[] = [];
  for (const panel of dashboard.panels) {
    for (const target of panel.targets ?? []) found.push({ where: `panel "${panel.title}"`, expr: target.expr, shown: labelsIn(target.legendFormat ?? "", /\{\{\s*(\w+)\s*\}\}/g) });
  }
  for (const rule of rules.groups.flatMap((group) => group.rules)) {
    const annotations = rule.annotations as Record<string, string>;
    found.push({ where: `alert ${String(rule.alert)}`, expr: String(rule.expr), shown: labelsIn(Object.values(annotations).join(" "), /\$labels\.(\w+)/g) });
  }
  return found;
}

describe("monitoring: the shipped Grafana dashboard and Prometheus alert rules", () => {
  it("the dashboard is a Grafana import: a Prometheus data source asked on import, a network variable, every panel on it", () => {
    const json = dashboard as unknown as Record<string, any>;
    expect(json.__inputs).to.deep.equal([{ name: "DS_PROMETHEUS", label: "Prometheus", description: "The Prometheus that scrapes the facilitator's /metrics", type: "datasource", pluginId: "prometheus", pluginName: "Prometheus" }]);
    expect(json.uid).to.equal("x402-facilitator-cronos");
    expect(json.schemaVersion).to.be.a("number");
    expect(json.templating.list.map((variable: { name: string }) => variable.name)).to.deep.equal(["network"]);
    const ids = json.panels.map((panel: { id: number }) => panel.id);
    expect(new Set(ids).size).to.equal(ids.length);
    for (const panel of json.panels as Array<Record<string, any>>) {
      expect(["row", "timeseries", "stat"], panel.title).to.include(panel.type);
      if (panel.type === "row") continue;
      expect(panel.datasource, panel.title).to.deep.equal({ type: "prometheus", uid: "${DS_PROMETHEUS}" });
      expect(panel.description, panel.title).to.be.a("string").and.not.equal("");
      expect(panel.targets.length, panel.title).to.be.greaterThan(0);
      // Every panel over a network-labelled metric follows the variable.
      for (const target of panel.targets) if (/network/.test(target.legendFormat)) expect(target.expr, panel.title).to.include('network=~"$network"');
    }
  });

  it("the rules are Prometheus rule groups: each alert named once, with an expression, a severity (page or warning), a summary and a description", () => {
    expect(rules.groups.map((group) => group.name)).to.deep.equal(["x402-facilitator"]);
    const all = rules.groups[0]!.rules;
    const names = all.map((rule) => rule.alert);
    expect(new Set(names).size).to.equal(names.length);
    for (const rule of all) {
      expect(Object.keys(rule).filter((key) => !["alert", "expr", "for", "labels", "annotations"].includes(key)), String(rule.alert)).to.deep.equal([]);
      expect(rule.alert).to.match(/^X402[A-Za-z]+$/);
      expect(rule.expr).to.be.a("string");
      if (rule.for !== undefined) expect(rule.for, String(rule.alert)).to.match(/^\d+[smh]$/);
      expect(rule.labels, String(rule.alert)).to.have.keys("severity");
      expect(["page", "warning"]).to.include((rule.labels as Record<string, string>).severity);
      expect(rule.annotations, String(rule.alert)).to.have.keys("summary", "description");
    }
    // What pages someone, as the issue names it: runway, settles undecided or failing, fee cap, RPC failover, ledger.
    for (const metric of ["x402_relayer_runway_settles", "x402_ledger_oldest_pending_seconds", "x402_outcomes_total", "x402_fee_cap_exceeded", "x402_rpc_endpoint_up", "x402_rpc_endpoint_down_total", "x402_ledger_up"]) {
      expect(all.some((rule) => promqlRefs(String(rule.expr)).metrics.has(metric)), metric).to.equal(true);
    }
  });

  it("reads PromQL as Prometheus would name things: metrics, matcher labels and groupings; refuses what it cannot read", () => {
    const refs = promqlRefs('histogram_quantile(0.99, sum by (le, network) (rate(x402_settle_confirmation_seconds_bucket{network=~"$network", route!="x"}[$__rate_interval]))) / 1e3 > on (network) group_left x402_b');
    expect([...refs.metrics]).to.deep.equal([
      ["x402_settle_confirmation_seconds_bucket", new Set(["network", "route"])],
      ["x402_b", new Set()],
    ]);
    expect(refs.aggregations).to.deep.equal([["le", "network"]]);
    expect(refs.joins).to.deep.equal([["network"]]);
    expect(promqlRefs("max(x402_a) > 1").aggregations).to.deep.equal([[]]);
    expect(promqlRefs("sum(rate(x402_a[5m])) by (route)").aggregations).to.deep.equal([["route"]]);
    for (const bad of ["sum(x402_a", "x402_a)", "rated(x402_a[5m])", '{network="a"}', "x402_a{network=a}", "x402_a[5 m]", "sum without (a) (x402_a)"]) {
      expect(() => promqlRefs(bad), bad).to.throw();
    }
    expect(() => parseYaml("a:\n  - b: [1, 2]\n")).to.throw("outside the plain subset");
    expect(() => parseYaml("a: 1\na: 2\n")).to.throw("a repeated");
    expect(parseYaml('a:\n  - b: x > 1\n    c: "q: {{ $labels.n }}"\n  - 127.0.0.1:9464\n')).to.deep.equal({ a: [{ b: "x > 1", c: "q: {{ $labels.n }}" }, "127.0.0.1:9464"] });
  });

  describe("against a live facilitator's /metrics, after a payment", function () {
    this.timeout(120_000);
    let chain: Chain;
    let running: RunningFacilitator;
    let page: Map<string, Set<string>>;

    before(async () => {
      const proxied = await openProxiedChain();
      chain = proxied.chain;
      // Two RPC URLs, the second refusing connections: the failover metrics have their series.
      const config = loadConfig({
        CRONOS_TESTNET_RPC_URL: `${proxied.rpcUrls},http://127.0.0.1:1`,
        RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer,
        PORT: "0",
        METRICS_PORT: "0",
        METRICS_CACHE_MS: "0",
        RPC_RANK_INTERVAL_MS: "200",
        POLLING_INTERVAL_MS: "20",
        HEAD_CACHE_MS: "0",
        HEALTH_CACHE_MS: "0",
        RATE_LIMIT_VERIFY_PER_MINUTE: "2",
        RATE_LIMIT_SETTLE_PER_MINUTE: "0",
        RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
      });
      running = await startTestFacilitator(config);
      const post = (route: string, body: unknown) =>
        fetch(`${running.url}/v2/x402/${route}`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      const payment = await makePayment(chain);
      expect(((await (await post("verify", payment.body)).json()) as { isValid: boolean }).isValid).to.equal(true);
      expect(((await (await post("settle", payment.body)).json()) as { event: string }).event).to.equal("payment.settled");
      // Past the verify limit once: the rate-limit series exists too.
      const statuses = [];
      for (let i = 0; i < 2; i++) statuses.push((await post("verify", (await makePayment(chain)).body)).status);
      expect(statuses).to.deep.equal([200, 429]);
      const scrape = async () => (await fetch(running.metricsUrl!)).text();
      const downCounted = async () => /^x402_rpc_endpoint_down_total\{network="cronos-testnet",endpoint="http:\/\/127\.0\.0\.1:1 \(URL #2 of 2\)"\} 1$/m.test(await scrape());
      expect(await waitUntil(downCounted, 10_000), "the dead URL's ranking ping counted as down").to.equal(true);
      page = seriesLabels(await scrape());
    });
    after(async () => {
      await running?.close(0);
    });

    it("every metric a panel or an alert names has series, with every label its matchers, groupings, legends and annotations use", () => {
      const problems: string[] = [];
      const all = queries();
      expect(all.length).to.be.greaterThan(30);
      for (const { where, expr, shown } of all) {
        const refs = promqlRefs(expr);
        expect(refs.metrics.size, `${where}: ${expr}`).to.be.greaterThan(0);
        for (const [metric, matched] of refs.metrics) {
          const labels = page.get(metric);
          if (!labels) {
            problems.push(`${where}: ${metric} has no series on /metrics`);
            continue;
          }
          for (const label of new Set([...matched, ...refs.aggregations.flat(), ...refs.joins.flat(), ...shown])) {
            if (!labels.has(label)) problems.push(`${where}: ${metric} has no label ${label}`);
          }
        }
        // What a legend or an annotation shows survives every aggregation of the expression.
        for (const kept of refs.aggregations) for (const label of shown) if (!kept.includes(label)) problems.push(`${where}: ${label} is aggregated away`);
      }
      expect(problems).to.deep.equal([]);
    });

    it("the network variable lists the networks served", () => {
      const [variable] = dashboard.templating.list;
      const match = /^label_values\((\w+), (\w+)\)$/.exec(variable!.query.query);
      expect(match, variable!.query.query).to.not.equal(null);
      expect(page.get(match![1]!)?.has(match![2]!)).to.equal(true);
    });
  });

  it("docs/operations.md's Prometheus block scrapes the default metrics address and loads the shipped rules file", () => {
    const docs = read("docs/operations.md");
    const blocks = [...docs.matchAll(/```yaml\n([\s\S]*?)```/g)].map((match) => parseYaml(match[1]!) as Record<string, any>);
    expect(blocks).to.have.length(1);
    const config = loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer }, { embedded: ["cronos-testnet"] });
    expect(blocks[0]!.scrape_configs[0].static_configs[0].targets).to.deep.equal([`${config.metricsHost}:${config.metricsPort}`]);
    expect(blocks[0]!.rule_files).to.deep.equal(["prometheus-alerts.yml"]);
    expect(docs).to.include("node_modules/cronos-x402-facilitator-kit/docs/monitoring/");
    expect(docs).to.include(DASHBOARD_FILE);
  });
});
