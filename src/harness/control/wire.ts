import { HttpRequestError, TimeoutError } from "viem";
import type { NetworkName } from "../../protocol/networks.js";
import type { RequestProvider } from "../rpc-bridge.js";

/** How an RPC fault treats a call: refused, answered late, or answered never. */
export type RpcFaultMode = "refuse" | "delay" | "drop";

/** One RPC fault in force. */
export interface RpcRule {
  id: string;
  /** Every network when absent. */
  network?: NetworkName;
  mode: RpcFaultMode;
  delayMs?: number;
  /** Every method when absent. */
  methods?: ReadonlySet<string>;
  /** Calls it still takes; it ends after the last (absent: until removed). */
  callsLeft?: number;
}

/** The facilitator's link to one chain: an EIP-1193 provider that passes through the faults in force. */
export interface Wire {
  provider: Required<Pick<RequestProvider, "request">>;
  /**
   * Cuts this link for good, as a process that died: every later call is refused, and calls waiting
   * on a delay or a dropped answer end now. What a restarted facilitator leaves behind.
   */
  cut(): void;
}

/**
 * The RPC between the local stack's facilitator and its chains, where RPC faults happen. The facilitator
 * reaches its chains in process (not over HTTP): each of its links ({@link RpcFaults.wire}) stands where
 * its HTTP transport would, and fails as that transport fails: a refused connection is viem's
 * `HttpRequestError` (`fetch failed`, `ECONNREFUSED`), a dropped answer is viem's `TimeoutError` once the
 * facilitator's `RPC_TIMEOUT_MS` has passed (the call itself reaches the chain: a dropped
 * `eth_sendRawTransaction` is broadcast), a delay holds the call before it reaches the chain.
 */
export class RpcFaults {
  readonly #rules = new Map<string, RpcRule>();
  readonly #onSpent: (id: string) => void;
  /** Waits in progress (delays, dropped answers), ended at once by {@link close}. */
  readonly #waits = new Set<() => void>();

  /** @param onSpent - Called when a rule with `callsLeft` has taken its last call (it is removed first). */
  constructor(onSpent: (id: string) => void) {
    this.#onSpent = onSpent;
  }

  add(rule: RpcRule): void {
    this.#rules.set(rule.id, { ...rule });
  }

  /** Removes the rule; false when it was not in force. */
  remove(id: string): boolean {
    return this.#rules.delete(id);
  }

  /** Calls the rule `id` still takes, when it counts them. */
  callsLeft(id: string): number | undefined {
    return this.#rules.get(id)?.callsLeft;
  }

  /** Removes every rule and ends every wait (the stack stops). */
  close(): void {
    this.#rules.clear();
    for (const end of [...this.#waits]) end();
  }

  /**
   * A link from one facilitator instance to `network`'s chain (`target`), as the facilitator's transport
   * to `url` with a `timeoutMs` per call.
   */
  wire(network: NetworkName, target: RequestProvider, url: string, timeoutMs: number): Wire {
    let cut = false;
    const ends = new Set<() => void>();
    const refused = (args: { method: string; params?: unknown }) =>
      new HttpRequestError({
        url,
        body: { method: args.method, params: args.params },
        details: "fetch failed",
        cause: Object.assign(new Error(`connect ECONNREFUSED ${new URL(url).host}`), { code: "ECONNREFUSED" }),
      });
    const wait = (ms: number) =>
      new Promise<void>((resolve) => {
        const end = () => {
          clearTimeout(timer);
          this.#waits.delete(end);
          ends.delete(end);
          resolve();
        };
        const timer = setTimeout(end, ms);
        this.#waits.add(end);
        ends.add(end);
      });
    return {
      provider: {
        request: async (args) => {
          if (cut) throw refused(args);
          const rule = this.#take(network, args.method);
          if (!rule) return target.request(args);
          if (rule.mode === "refuse") throw refused(args);
          if (rule.mode === "delay") {
            await wait(rule.delayMs ?? 0);
            if (cut) throw refused(args);
            return target.request(args);
          }
          // Dropped: the chain gets the call, the caller never gets the answer, and gives up at its time-out.
          void target.request(args).catch(() => undefined);
          await wait(timeoutMs);
          throw new TimeoutError({ body: { method: args.method, params: args.params }, url });
        },
      },
      cut() {
        cut = true;
        for (const end of [...ends]) end();
      },
    };
  }

  /** The first rule for this call, its count taken; a rule whose last call this is ends. */
  #take(network: NetworkName, method: string): RpcRule | undefined {
    for (const rule of this.#rules.values()) {
      if (rule.network !== undefined && rule.network !== network) continue;
      if (rule.methods && !rule.methods.has(method)) continue;
      if (rule.callsLeft !== undefined) {
        rule.callsLeft -= 1;
        if (rule.callsLeft <= 0) {
          this.#rules.delete(rule.id);
          this.#onSpent(rule.id);
        }
      }
      return rule;
    }
    return undefined;
  }
}
