// The OpenTelemetry SDK, started when an operator turns tracing on: loaded here and only here (optional peer
// dependencies of the kit), so a seller's or buyer's install and a facilitator with tracing off load none of it.
import { context, propagation, trace, type Tracer } from "@opentelemetry/api";
import { KitError } from "../protocol/errors.js";
import { globalTracer, KIT_TRACER_NAME, useStepTracer } from "../telemetry/spans.js";
import { traceparentPropagator } from "../telemetry/traceparent.js";

/** Where and how spans are exported, and which are kept: the OTEL_* settings, read and checked by the caller. */
export interface TracingSettings {
  /** `otlp`: OTLP over HTTP with JSON bodies to {@link endpoint}; `console`: printed to stdout (for a look by hand). */
  exporters: ReadonlyArray<"otlp" | "console">;
  /** The traces URL, `…/v1/traces`. */
  endpoint: string;
  /** Sent with each export (a vendor's API key): secrets, never logged. */
  headers: Readonly<Record<string, string>>;
  /** One export's time limit. */
  timeoutMs: number;
  /** `service.name`. */
  serviceName: string;
  /** More resource attributes (`OTEL_RESOURCE_ATTRIBUTES`). */
  resourceAttributes: Readonly<Record<string, string>>;
  /** Which traces are kept: `ratio` of new ones (1 = all); `parentBased`: a caller's sampled flag decides for its trace. */
  sampler: { ratio: number; parentBased: boolean };
  /** The batch span processor: spans wait at most `delayMs`; past `maxQueueSize` waiting, new ones are dropped. */
  batch: { delayMs: number; maxQueueSize: number; maxExportBatchSize: number; exportTimeoutMs: number };
}

/** A running tracing SDK, as one of its users holds it. */
export interface Tracing {
  tracer: Tracer;
  /** Exports every span ended so far. */
  flush(): Promise<void>;
  /** This user is done: the last one exports what is left and stops the SDK. */
  close(): Promise<void>;
}

/** The packages an operator installs beside the kit to turn tracing on. */
export const TRACING_PACKAGES = ["@opentelemetry/sdk-trace", "@opentelemetry/exporter-trace-otlp-http", "@opentelemetry/context-async-hooks", "@opentelemetry/resources"] as const;

/** Tracing was asked for, and its packages are not installed. */
export class TracingUnavailableError extends KitError<"tracing_unavailable"> {
  override name = "TracingUnavailableError";
  constructor(missing: readonly string[], options?: ErrorOptions) {
    const names = missing.map((name) => `"${name}"`).join(", ");
    super(
      "tracing_unavailable",
      `tracing needs the package${missing.length > 1 ? "s" : ""} ${names} (optional peer dependencies of the kit): npm install ${TRACING_PACKAGES.join(" ")}`,
      { ...options, docsPath: "docs/operations.md#traces" },
    );
  }
}

interface Sdk {
  tracer: Tracer;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** The longest the SDK's shutdown waits for its last exports. */
export const SHUTDOWN_WAIT_MS = 5_000;

/** One SDK per process (the API's globals are): the first start's settings hold until its last user closes. */
let running: { sdk: Promise<Sdk>; users: number } | undefined;

/**
 * Starts the SDK (or joins the one running in this process): the kit's propagator (`traceparent`), a context
 * manager (AsyncLocalStorage) and a tracer provider are registered globally, spans batched to the exporters.
 * When the process already has an SDK of its own registered, the kit traces into that one and starts none.
 *
 * @throws {TracingUnavailableError} when the SDK's packages are not installed.
 */
export async function startTracing(settings: TracingSettings): Promise<Tracing> {
  if (!running) {
    const borrowed = globalTracer();
    const sdk = borrowed ? Promise.resolve({ tracer: borrowed, flush: async () => {}, shutdown: async () => {} }) : startSdk(settings);
    running = { sdk, users: 0 };
  }
  const current = running;
  current.users++;
  let sdk: Sdk;
  try {
    sdk = await current.sdk;
  } catch (error) {
    if (running === current) running = undefined;
    throw error;
  }
  // Settle's steps are spanned while a facilitator of this process traces (telemetry's `step`).
  useStepTracer(sdk.tracer);
  let closed = false;
  return {
    tracer: sdk.tracer,
    flush: () => sdk.flush(),
    async close() {
      if (closed) return;
      closed = true;
      if (--current.users > 0) return;
      if (running === current) running = undefined;
      useStepTracer(undefined);
      await sdk.shutdown();
    },
  };
}

/** The SDK's modules, or {@link TracingUnavailableError} naming every package missing. */
async function loadSdk() {
  const settled = await Promise.allSettled([
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/context-async-hooks"),
    import("@opentelemetry/resources"),
  ] as const);
  const missing = TRACING_PACKAGES.filter((_, index) => {
    const outcome = settled[index]!;
    return outcome.status === "rejected" && (outcome.reason as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND";
  });
  if (missing.length > 0) throw new TracingUnavailableError(missing);
  const failed = settled.find((outcome) => outcome.status === "rejected");
  if (failed) throw (failed as PromiseRejectedResult).reason;
  const [sdk, otlp, hooks, resources] = settled as unknown as [
    PromiseFulfilledResult<typeof import("@opentelemetry/sdk-trace")>,
    PromiseFulfilledResult<typeof import("@opentelemetry/exporter-trace-otlp-http")>,
    PromiseFulfilledResult<typeof import("@opentelemetry/context-async-hooks")>,
    PromiseFulfilledResult<typeof import("@opentelemetry/resources")>,
  ];
  return { sdk: sdk.value, otlp: otlp.value, hooks: hooks.value, resources: resources.value };
}

async function startSdk(settings: TracingSettings): Promise<Sdk> {
  const { sdk, otlp, hooks, resources } = await loadSdk();
  const { ratio, parentBased } = settings.sampler;
  const root = ratio >= 1 ? new sdk.AlwaysOnSampler() : ratio <= 0 ? new sdk.AlwaysOffSampler() : new sdk.TraceIdRatioBasedSampler(ratio);
  const { delayMs, maxQueueSize, maxExportBatchSize, exportTimeoutMs } = settings.batch;
  const spanProcessors = settings.exporters.map((kind) => {
    const exporter =
      kind === "console"
        ? new sdk.ConsoleSpanExporter()
        : new otlp.OTLPTraceExporter({ url: settings.endpoint, headers: { ...settings.headers }, timeoutMillis: settings.timeoutMs });
    return new sdk.BatchSpanProcessor({ exporter, scheduledDelayMillis: delayMs, maxQueueSize, maxExportBatchSize, exportTimeoutMillis: exportTimeoutMs });
  });
  const provider = new sdk.TracerProvider({
    sampler: parentBased ? new sdk.ParentBasedSampler({ root }) : root,
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ ...settings.resourceAttributes, "service.name": settings.serviceName })),
    spanProcessors,
  });
  const contextManager = new hooks.AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(traceparentPropagator);
  trace.setGlobalTracerProvider(provider);
  return {
    tracer: provider.getTracer(KIT_TRACER_NAME),
    flush: () => provider.forceFlush(),
    async shutdown() {
      trace.disable();
      propagation.disable();
      context.disable();
      // A collector that hangs must not hold the process's exit: what is not exported by then is dropped.
      let timer: NodeJS.Timeout | undefined;
      const limit = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.min(settings.timeoutMs, SHUTDOWN_WAIT_MS)).unref()));
      await Promise.race([provider.shutdown().catch(() => undefined), limit]);
      clearTimeout(timer);
    },
  };
}
