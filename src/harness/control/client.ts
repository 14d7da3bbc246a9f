import { HarnessControlError, type ChainTimes, type FaultHandle, type FaultInfo, type FaultSpec, type HarnessControl, type HarnessStatus } from "./spec.js";

/** Options of {@link connectHarness}. */
export interface ConnectHarnessOptions {
  /** Per call; default 120 s (a restart or a fault on a chain with slow blocks takes a while). */
  timeoutMs?: number;
}

/**
 * The fault and time controls of a local stack running elsewhere (another process: a vitest worker, a
 * suite beside `cronos-x402 start --background`), over its control endpoint: `url` is the stack's
 * `harnessUrl` (`HARNESS_URL` in the `--write-env` file). The same {@link HarnessControl} as
 * `stack.harness`; a refusal rejects with {@link HarnessControlError} (its HTTP status and message).
 */
export function connectHarness(url: string, options: ConnectHarnessOptions = {}): HarnessControl {
  const base = url.replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 120_000;
  /** A failed fetch as one line: a frozen endpoint by its time-out, else the connection's error code. */
  const unreachable = (error: unknown) => {
    if ((error as { name?: string }).name === "TimeoutError") return new HarnessControlError(0, `the harness at ${base} did not answer within ${timeoutMs / 1000} s`);
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    return new HarnessControlError(0, `cannot reach the harness at ${base}: ${cause?.code ?? cause?.message ?? (error as Error).message}`);
  };
  async function call<T>(method: "GET" | "POST" | "DELETE", path: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, {
        method,
        ...(body === undefined ? {} : { headers: { "content-type": "application/json" }, body: JSON.stringify(body, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value)) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw unreachable(error);
    }
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      // The head came, the body did not: the time-out covers the whole answer.
      throw unreachable(error);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new HarnessControlError(response.status, `the harness at ${base} answered HTTP ${response.status} with something other than JSON: ${text.slice(0, 200)}`);
    }
    if (!response.ok) throw new HarnessControlError(response.status, String((json as { error?: unknown }).error ?? `HTTP ${response.status}`));
    return json as T;
  }
  const handle = (info: FaultInfo): FaultHandle => ({ id: info.id, kind: info.kind, info, undo: () => call<FaultInfo>("DELETE", `/faults/${encodeURIComponent(info.id)}`) });
  return {
    fault: async (spec: FaultSpec) => handle(await call<FaultInfo>("POST", "/faults", spec)),
    faults: () => call<FaultInfo[]>("GET", "/faults"),
    undo: (id) => call<FaultInfo>("DELETE", `/faults/${encodeURIComponent(id)}`),
    reset: async () => (await call<{ undone: number }>("DELETE", "/faults")).undone,
    advanceTime: async (seconds, advance = {}) => (await call<{ chainTime: ChainTimes }>("POST", "/time/advance", { seconds, ...advance })).chainTime,
    stopBlocks: async (stop = {}) => handle(await call<FaultInfo>("POST", "/time/stop-blocks", stop)),
    resumeBlocks: async (resume = {}) => (await call<{ resumed: number }>("POST", "/time/resume-blocks", resume)).resumed,
    restartFacilitator: async () => void (await call<unknown>("POST", "/facilitator/restart")),
    status: () => call<HarnessStatus>("GET", ""),
  };
}
