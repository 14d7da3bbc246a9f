// Traces: OpenTelemetry's own environment variables (OTEL_*), as its SDKs read them, checked once here.
// Off unless OTEL_TRACES_EXPORTER names an exporter or an OTLP endpoint is set; nothing is loaded while off.
import { z } from "zod";
import type { TracingSettings } from "../tracing.js";
import { ConfigError } from "./error.js";

const text = z.string().optional();

/** The OTEL_* variables the facilitator reads (the schema's part for traces). */
export const tracingEnvShape = {
  OTEL_SDK_DISABLED: text,
  OTEL_TRACES_EXPORTER: text,
  OTEL_EXPORTER_OTLP_ENDPOINT: text,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: text,
  OTEL_EXPORTER_OTLP_PROTOCOL: text,
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: text,
  OTEL_EXPORTER_OTLP_HEADERS: text,
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: text,
  OTEL_EXPORTER_OTLP_TIMEOUT: text,
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: text,
  OTEL_SERVICE_NAME: text,
  OTEL_RESOURCE_ATTRIBUTES: text,
  OTEL_TRACES_SAMPLER: text,
  OTEL_TRACES_SAMPLER_ARG: text,
  OTEL_BSP_SCHEDULE_DELAY: text,
  OTEL_BSP_MAX_QUEUE_SIZE: text,
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: text,
  OTEL_BSP_EXPORT_TIMEOUT: text,
};

type TracingEnv = { [K in keyof typeof tracingEnvShape]?: string | undefined };

/** The `service.name` of a facilitator that sets no OTEL_SERVICE_NAME. */
export const DEFAULT_SERVICE_NAME = "cronos-x402-facilitator";
/** Where spans go when tracing is on and no endpoint is set: a collector on this machine. */
export const DEFAULT_TRACES_ENDPOINT = "http://localhost:4318/v1/traces";

const SAMPLERS = ["always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"];

/** Trimmed, or undefined when unset or blank. */
const value = (raw: string | undefined) => (raw === undefined || raw.trim() === "" ? undefined : raw.trim());

function integer(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  const given = value(raw);
  if (given === undefined) return fallback;
  const n = Number(given);
  if (!Number.isInteger(n) || n < min || n > max) throw new ConfigError(`${name}: must be an integer from ${min} to ${max}, got "${given}"`);
  return n;
}

/**
 * `key=value,key=value` (values percent-encoded, as the OTel spec says). `secret`: the message names the
 * variable and the entry's place, never its text (OTLP headers carry a vendor's API key).
 */
function keyValues(name: string, raw: string | undefined, secret: boolean): Record<string, string> {
  const given = value(raw);
  const entries: Record<string, string> = {};
  if (given === undefined) return entries;
  given.split(",").forEach((entry, index) => {
    const at = entry.indexOf("=");
    const key = at > 0 ? entry.slice(0, at).trim() : "";
    let decoded: string | undefined;
    try {
      decoded = at > 0 ? decodeURIComponent(entry.slice(at + 1).trim()) : undefined;
    } catch {
      decoded = undefined;
    }
    if (key === "" || decoded === undefined || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key)) {
      throw new ConfigError(`${name}: entry #${index + 1} ${secret ? "" : `("${entry.trim()}") `}is not key=value (entries are separated by commas, values percent-encoded)`);
    }
    entries[key] = decoded;
  });
  return entries;
}

/** An http(s) URL; the message never repeats it (a collector's URL may carry a token). */
function httpUrl(name: string, raw: string): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name}: must be an http(s) URL`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new ConfigError(`${name}: must be an http(s) URL`);
  return raw;
}

/** The exporters OTEL_TRACES_EXPORTER names (`none` alone: none); unset: `otlp` when an OTLP endpoint is set. */
function exportersOf(env: TracingEnv): Array<"otlp" | "console"> {
  const given = value(env.OTEL_TRACES_EXPORTER);
  if (given === undefined) return value(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) ?? value(env.OTEL_EXPORTER_OTLP_ENDPOINT) ? ["otlp"] : [];
  const names = [...new Set(given.split(",").map((name) => name.trim().toLowerCase()))];
  for (const name of names) {
    if (name !== "otlp" && name !== "console" && name !== "none") {
      throw new ConfigError(`OTEL_TRACES_EXPORTER: "${name}" is not an exporter the facilitator has (otlp, console, none)`);
    }
  }
  if (names.includes("none")) {
    if (names.length > 1) throw new ConfigError("OTEL_TRACES_EXPORTER: none goes alone");
    return [];
  }
  return names as Array<"otlp" | "console">;
}

/** OTLP/HTTP with JSON bodies: the one protocol of the exporter the kit loads (a collector's OTLP/HTTP receiver takes it). */
function assertJsonProtocol(env: TracingEnv): void {
  const [name, given] = value(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
    ? ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", value(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)]
    : ["OTEL_EXPORTER_OTLP_PROTOCOL", value(env.OTEL_EXPORTER_OTLP_PROTOCOL)];
  if (given === undefined || given === "http/json") return;
  throw new ConfigError(`${name}: the facilitator exports OTLP over HTTP with JSON bodies: set http/json (got "${given}"; OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json overrides a process-wide setting)`);
}

/** The sampler: a ratio of new traces, and whether a caller's sampled flag decides for its own trace. */
function samplerOf(env: TracingEnv): TracingSettings["sampler"] {
  const name = (value(env.OTEL_TRACES_SAMPLER) ?? "parentbased_always_on").toLowerCase();
  if (!SAMPLERS.includes(name)) throw new ConfigError(`OTEL_TRACES_SAMPLER: must be one of ${SAMPLERS.join(", ")}, got "${name}"`);
  const parentBased = name.startsWith("parentbased_");
  const kind = name.replace("parentbased_", "");
  if (kind !== "traceidratio") return { ratio: kind === "always_on" ? 1 : 0, parentBased };
  const arg = value(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) throw new ConfigError(`OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1, got "${arg}"`);
  return { ratio, parentBased };
}

/**
 * The trace settings the OTEL_* variables give, or `undefined` when tracing is off: OTEL_SDK_DISABLED=true,
 * OTEL_TRACES_EXPORTER=none, or neither an exporter nor an OTLP endpoint named. Throws {@link ConfigError}
 * naming the variable at the first problem.
 */
export function tracingSettings(env: TracingEnv): TracingSettings | undefined {
  const disabled = value(env.OTEL_SDK_DISABLED)?.toLowerCase();
  if (disabled !== undefined && disabled !== "true" && disabled !== "false") throw new ConfigError(`OTEL_SDK_DISABLED: must be "true" or "false"`);
  const exporters = exportersOf(env);
  if (disabled === "true" || exporters.length === 0) return undefined;
  assertJsonProtocol(env);
  const tracesEndpoint = value(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const baseEndpoint = value(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  const endpoint = tracesEndpoint
    ? httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tracesEndpoint)
    : baseEndpoint
      ? `${httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT", baseEndpoint).replace(/\/+$/, "")}/v1/traces`
      : DEFAULT_TRACES_ENDPOINT;
  const headers = value(env.OTEL_EXPORTER_OTLP_TRACES_HEADERS)
    ? keyValues("OTEL_EXPORTER_OTLP_TRACES_HEADERS", env.OTEL_EXPORTER_OTLP_TRACES_HEADERS, true)
    : keyValues("OTEL_EXPORTER_OTLP_HEADERS", env.OTEL_EXPORTER_OTLP_HEADERS, true);
  const timeoutMs = value(env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT)
    ? integer("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", env.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, 10_000, 1, 600_000)
    : integer("OTEL_EXPORTER_OTLP_TIMEOUT", env.OTEL_EXPORTER_OTLP_TIMEOUT, 10_000, 1, 600_000);
  const maxQueueSize = integer("OTEL_BSP_MAX_QUEUE_SIZE", env.OTEL_BSP_MAX_QUEUE_SIZE, 2_048, 1, 1_000_000);
  const maxExportBatchSize = integer("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, Math.min(512, maxQueueSize), 1, maxQueueSize);
  return {
    exporters,
    endpoint,
    headers,
    timeoutMs,
    serviceName: value(env.OTEL_SERVICE_NAME) ?? DEFAULT_SERVICE_NAME,
    resourceAttributes: keyValues("OTEL_RESOURCE_ATTRIBUTES", env.OTEL_RESOURCE_ATTRIBUTES, false),
    sampler: samplerOf(env),
    batch: {
      delayMs: integer("OTEL_BSP_SCHEDULE_DELAY", env.OTEL_BSP_SCHEDULE_DELAY, 5_000, 1, 600_000),
      maxQueueSize,
      maxExportBatchSize,
      exportTimeoutMs: integer("OTEL_BSP_EXPORT_TIMEOUT", env.OTEL_BSP_EXPORT_TIMEOUT, 30_000, 1, 600_000),
    },
  };
}
