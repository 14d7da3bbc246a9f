// The OTEL_* settings of traces (docs/operations.md, "Traces"): off unless asked for, read as OpenTelemetry's
// SDKs read them, refused naming the variable, and a secret in them never repeated.
import { readFileSync } from "node:fs";
import { expect } from "chai";
import { CONFIG_VARIABLES, ConfigError, loadConfig } from "../../src/facilitator/config/index.js";
import { DEFAULT_SERVICE_NAME, DEFAULT_TRACES_ENDPOINT } from "../../src/facilitator/config/tracing.js";
import { TRACING_PACKAGES } from "../../src/facilitator/tracing.js";
import { formatTraceparent, parseTraceparent } from "../../src/telemetry/traceparent.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";

const load = (env: Record<string, string>) => loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, ...env }, { embedded: ["cronos-testnet"] });

const DEFAULTS = {
  exporters: ["otlp"],
  headers: {},
  timeoutMs: 10_000,
  serviceName: DEFAULT_SERVICE_NAME,
  resourceAttributes: {},
  sampler: { ratio: 1, parentBased: true },
  batch: { delayMs: 5_000, maxQueueSize: 2_048, maxExportBatchSize: 512, exportTimeoutMs: 30_000 },
};

describe("configuration: traces (OTEL_*)", () => {
  it("is off by default, with OTEL_TRACES_EXPORTER=none, and with OTEL_SDK_DISABLED=true whatever else is set", () => {
    expect(load({}).tracing).to.equal(undefined);
    expect(load({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" }).tracing, "settings alone turn nothing on").to.equal(undefined);
    expect(load({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing).to.equal(undefined);
    expect(load({ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" }).tracing).to.equal(undefined);
  });

  it("an OTLP endpoint turns it on: the base endpoint gets /v1/traces, the traces endpoint is taken as it is, and the defaults are OpenTelemetry's", () => {
    expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).tracing).to.deep.equal({ ...DEFAULTS, endpoint: "http://collector:4318/v1/traces" });
    expect(load({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://b/otlp/traces" }).tracing?.endpoint).to.equal("https://b/otlp/traces");
    expect(load({ OTEL_TRACES_EXPORTER: "otlp" }).tracing?.endpoint).to.equal(DEFAULT_TRACES_ENDPOINT);
    expect(load({ OTEL_TRACES_EXPORTER: "console,otlp", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }).tracing?.exporters).to.deep.equal(["console", "otlp"]);
  });

  it("reads the headers (percent-decoded; the traces' own win), the time-out, the service, the resource, the sampler and the batch bounds", () => {
    const tracing = load({
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_HEADERS: "x-ignored=1",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "api-key=s%3Dcr%2Ct, x-team = pay",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2500",
      OTEL_SERVICE_NAME: "facilitator-eu",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.namespace=x402",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
      OTEL_BSP_SCHEDULE_DELAY: "1000",
      OTEL_BSP_MAX_QUEUE_SIZE: "100",
      OTEL_BSP_EXPORT_TIMEOUT: "5000",
    }).tracing;
    expect(tracing).to.deep.equal({
      ...DEFAULTS,
      endpoint: DEFAULT_TRACES_ENDPOINT,
      headers: { "api-key": "s=cr,t", "x-team": "pay" },
      timeoutMs: 2_500,
      serviceName: "facilitator-eu",
      resourceAttributes: { "deployment.environment": "prod", "service.namespace": "x402" },
      sampler: { ratio: 0.25, parentBased: true },
      batch: { delayMs: 1_000, maxQueueSize: 100, maxExportBatchSize: 100, exportTimeoutMs: 5_000 },
    });
    expect(load({ OTEL_TRACES_EXPORTER: "otlp", OTEL_TRACES_SAMPLER: "traceidratio" }).tracing?.sampler).to.deep.equal({ ratio: 1, parentBased: false });
    expect(load({ OTEL_TRACES_EXPORTER: "otlp", OTEL_TRACES_SAMPLER: "always_off" }).tracing?.sampler).to.deep.equal({ ratio: 0, parentBased: false });
  });

  it("refuses what it cannot do or read, naming the variable and never repeating a header or a URL", () => {
    const on = { OTEL_TRACES_EXPORTER: "otlp" };
    const cases: Array<[Record<string, string>, string]> = [
      [{ OTEL_TRACES_EXPORTER: "jaeger" }, 'OTEL_TRACES_EXPORTER: "jaeger" is not an exporter the facilitator has (otlp, console, none)'],
      [{ OTEL_TRACES_EXPORTER: "otlp,none" }, "OTEL_TRACES_EXPORTER: none goes alone"],
      [{ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, 'OTEL_EXPORTER_OTLP_PROTOCOL: the facilitator exports OTLP over HTTP with JSON bodies: set http/json (got "grpc"'],
      [{ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" }, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: the facilitator exports"],
      [{ ...on, OTEL_EXPORTER_OTLP_TRACES_HEADERS: "authorization=Bearer ok,SECRET-TOKEN-VALUE" }, "OTEL_EXPORTER_OTLP_TRACES_HEADERS: entry #2 is not key=value"],
      [{ ...on, OTEL_EXPORTER_OTLP_HEADERS: "api-key=%E0%A4%A" }, "OTEL_EXPORTER_OTLP_HEADERS: entry #1 is not key=value"],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: "ftp://user:SECRET-PASSWORD@collector" }, "OTEL_EXPORTER_OTLP_ENDPOINT: must be an http(s) URL"],
      [{ ...on, OTEL_TRACES_SAMPLER: "sometimes" }, "OTEL_TRACES_SAMPLER: must be one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio"],
      [{ ...on, OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "1.5" }, 'OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1, got "1.5"'],
      [{ ...on, OTEL_BSP_MAX_QUEUE_SIZE: "10", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "20" }, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE: must be an integer from 1 to 10, got "20"'],
      [{ ...on, OTEL_EXPORTER_OTLP_TIMEOUT: "0" }, 'OTEL_EXPORTER_OTLP_TIMEOUT: must be an integer from 1 to 600000, got "0"'],
      [{ ...on, OTEL_SDK_DISABLED: "yes" }, 'OTEL_SDK_DISABLED: must be "true" or "false"'],
    ];
    for (const [env, message] of cases) {
      let thrown: unknown;
      try {
        load(env);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, JSON.stringify(env)).to.be.instanceOf(ConfigError);
      expect((thrown as Error).message).to.include(message);
      expect((thrown as Error).message).not.to.match(/SECRET/);
    }
  });

  it("a one-letter slip of an OTEL_ variable it reads stops start-up; OpenTelemetry's other variables (logs, metrics) are left alone", () => {
    expect(() => load({ OTEL_EXPORTER_OTLP_ENDPONT: "http://collector:4318" })).to.throw(ConfigError, "OTEL_EXPORTER_OTLP_ENDPONT: unknown variable; did you mean OTEL_EXPORTER_OTLP_ENDPOINT?");
    const others = { OTEL_BLRP_SCHEDULE_DELAY: "1000", OTEL_LOGS_EXPORTER: "otlp", OTEL_METRICS_EXPORTER: "none", OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: "http://c/v1/logs", OTEL_PROPAGATORS: "tracecontext" };
    expect(load(others).tracing).to.equal(undefined);
  });
});

describe("docs/operations.md, Traces: the block that turns tracing on", () => {
  it("installs the packages the facilitator loads, and sets only variables it reads, which turn tracing on as the text says", () => {
    const section = readFileSync(new URL("../../docs/operations.md", import.meta.url), "utf8").split("\n## Traces\n")[1]!.split("\n## ")[0]!;
    const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!.trim().split("\n"));
    expect(blocks).to.have.length(1);
    const [install, run] = blocks[0]!;
    expect(install!.split(" ")).to.deep.equal(["npm", "install", ...TRACING_PACKAGES]);
    const words = run!.split(" ");
    const env = Object.fromEntries(words.filter((word) => word.includes("=")).map((word) => word.split("=") as [string, string]));
    expect(words.filter((word) => !word.includes("="))).to.deep.equal(["npx", "cronos-x402", "facilitator"]);
    expect(Object.keys(env).filter((name) => !CONFIG_VARIABLES.includes(name))).to.deep.equal([]);
    expect(load(env).tracing).to.deep.include({ exporters: ["otlp"], endpoint: "http://collector:4318/v1/traces", serviceName: "x402-facilitator-testnet" });
  });
});

describe("W3C traceparent", () => {
  it("reads a version-00 value and writes it back; refuses version ff, extra fields on 00, zero ids, bad hex and a long value", () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const spanId = "00f067aa0ba902b7";
    expect(parseTraceparent(`00-${traceId}-${spanId}-01`)).to.deep.equal({ traceId, spanId, traceFlags: 1 });
    expect(formatTraceparent(traceId, spanId, 1)).to.equal(`00-${traceId}-${spanId}-01`);
    // A later version may append fields; only the sampled bit of the flags is kept.
    expect(parseTraceparent(`01-${traceId}-${spanId}-03-extra`)).to.deep.equal({ traceId, spanId, traceFlags: 1 });
    for (const bad of [
      `ff-${traceId}-${spanId}-01`,
      `00-${traceId}-${spanId}-01-extra`,
      `00-${"0".repeat(32)}-${spanId}-01`,
      `00-${traceId}-${"0".repeat(16)}-01`,
      `00-${traceId.toUpperCase()}-${spanId}-01`,
      `00-${traceId}-${spanId}`,
      `01-${traceId}-${spanId}-01-${"x".repeat(600)}`,
      "",
    ]) {
      expect(parseTraceparent(bad), bad.slice(0, 80)).to.equal(undefined);
    }
  });
});
