import type { Address, Hex } from "viem";
import type { FacilitatorHooks } from "../../facilitator/hooks.js";
import { NETWORK_NAMES, type NetworkName } from "../../protocol/networks.js";
import type { Authorization } from "../../protocol/schemas.js";
import type { LocalChain } from "../chain.js";
import { advanceTime, authorizationOfPayment, head, resumeMining, setBalance, setBlacklisted, setPaused, spendAuthorization, stopMining } from "./chain-actions.js";
import {
  describeFault,
  HarnessControlError,
  MAX_ADVANCE_SECONDS,
  MAX_ENDED_FAULTS,
  MAX_FAULTS,
  parseFaultSpec,
  parseNetwork,
  payerOf,
  publicSpec,
  type ChainTimes,
  type FaultHandle,
  type FaultInfo,
  type FaultSpec,
  type HarnessControl,
  type HarnessStatus,
  type ParsedFaultSpec,
} from "./spec.js";
import { bounded, startFailed, type FacilitatorSwitch, type HeldFault, type LocalHarnessOptions } from "./held.js";
import { holdNode, losePool, refusalsLeft } from "./node-faults.js";
import { RpcFaults } from "./wire.js";

/** A payment verify found valid: its network and the authorization it carries. */
interface ValidPayment {
  network: NetworkName;
  authorization: Authorization;
}

/** How long the `after-verify` faults may take to act on the chain before the verify is answered. */
const AFTER_VERIFY_MS = 60_000;

/**
 * The fault and time controls of a local stack, in its process ({@link HarnessControl}). Chain faults are
 * transactions and EDR mining/clock calls on the stack's chains (serialised per chain); RPC faults live
 * in the facilitator's links to its chains ({@link RpcFaults}); "busy" is the facilitator's quota held at
 * zero ({@link closedFor}); `after-verify` faults fire from the facilitator's `onAfterVerify` hook ({@link hooks}).
 * At most {@link MAX_FAULTS} are armed or in force at once; {@link close} undoes what is left.
 */
export class LocalHarness implements HarnessControl {
  /** The facilitator's links to its chains: the stack makes one per chain for each facilitator it starts. */
  readonly rpc: RpcFaults;
  readonly #chains: Partial<Record<NetworkName, LocalChain>>;
  readonly #networks: NetworkName[];
  readonly #facilitator: FacilitatorSwitch;
  readonly #timeoutMs: number;
  readonly #live = new Map<string, HeldFault>();
  readonly #ended: FaultInfo[] = [];
  /** Per network, the `blocks` faults holding its mining stopped. */
  readonly #stoppers = new Map<NetworkName, Set<string>>();
  /** The `facilitator-down` faults holding it stopped. */
  readonly #downs = new Set<string>();
  /** Per network, the chain action in progress: actions on one chain run one at a time. */
  readonly #queues = new Map<NetworkName, Promise<unknown>>();
  #sequence = 0;
  #closed = false;

  constructor(options: LocalHarnessOptions) {
    this.#chains = options.chains;
    this.#networks = NETWORK_NAMES.filter((network) => options.chains[network]);
    this.#facilitator = options.facilitator;
    this.#timeoutMs = options.operationTimeoutMs ?? 60_000;
    this.rpc = new RpcFaults((id) => void this.#finish(id, "ended"));
  }

  async fault(input: FaultSpec): Promise<FaultHandle> {
    const parsed = parseFaultSpec(input);
    if (!parsed.ok) throw new HarnessControlError(400, parsed.problem);
    return this.#handle(await this.#add(parsed.spec));
  }

  async faults(): Promise<FaultInfo[]> {
    const live = [...this.#live.values()].map((fault) => {
      const callsLeft = fault.spec.kind === "rpc" ? this.rpc.callsLeft(fault.info.id) : undefined;
      const refusals = fault.spec.kind === "lagging-backend" ? refusalsLeft(this.#chains, fault.info.id) : undefined;
      return { ...fault.info, ...(callsLeft !== undefined ? { callsLeft } : {}), ...(refusals !== undefined ? { refusalsLeft: refusals } : {}) };
    });
    return [...live, ...this.#ended.map((info) => ({ ...info }))];
  }

  async undo(id: string): Promise<FaultInfo> {
    const held = this.#live.get(id);
    if (held) {
      await this.#undo(held);
      return { ...held.info };
    }
    const ended = this.#ended.find((info) => info.id === id);
    if (ended) return { ...ended };
    throw new HarnessControlError(404, `no fault "${id.slice(0, 32)}" (armed, in force or recently ended)`);
  }

  async reset(): Promise<number> {
    const held = [...this.#live.values()];
    let failure: unknown;
    // Undone newest first: a later fault may rest on an earlier one (a balance set while another stood).
    for (const fault of held.reverse()) await this.#undo(fault).catch((error: unknown) => (failure ??= error));
    if (failure) throw failure;
    return held.length;
  }

  async advanceTime(seconds: number, options: { network?: string } = {}): Promise<ChainTimes> {
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_ADVANCE_SECONDS) {
      throw new HarnessControlError(400, `seconds: must be a whole number of seconds from 1 to ${MAX_ADVANCE_SECONDS}`);
    }
    return this.#advance(this.#targets(options.network), seconds);
  }

  async #advance(networks: readonly NetworkName[], seconds: number): Promise<ChainTimes> {
    const times: ChainTimes = {};
    for (const network of networks) {
      // With blocks stopped nothing is mined: the next block, when they resume, carries the new time.
      times[network] = await this.#onChain(network, (chain) => advanceTime(chain, seconds, !this.#stoppers.get(network)?.size));
    }
    return times;
  }

  stopBlocks(options: { network?: string; forSeconds?: number } = {}): Promise<FaultHandle> {
    return this.fault({ kind: "blocks", ...options });
  }

  /** Undoes every `blocks` fault (of `network`, when given): mining resumes. Resolves to how many. */
  async resumeBlocks(options: { network?: string } = {}): Promise<number> {
    const network = options.network === undefined ? undefined : this.#targets(options.network)[0];
    const blocks = [...this.#live.values()].filter((fault) => fault.spec.kind === "blocks" && (network === undefined || fault.spec.network === undefined || fault.spec.network === network));
    for (const fault of blocks) await this.#undo(fault);
    return blocks.length;
  }

  async restartFacilitator(): Promise<void> {
    this.#assertOpen();
    if (this.#downs.size > 0) {
      throw new HarnessControlError(409, `the facilitator is stopped (fault ${[...this.#downs].join(", ")}): undo that fault to start it`);
    }
    // Stopped with no fault holding it down: a start that failed (its port taken meanwhile). Try again.
    if (!this.#facilitator.running()) return this.#startFacilitator("starting the facilitator");
    await bounded(this.#timeoutMs, "restarting the facilitator", this.#facilitator.restart().catch((error: unknown) => Promise.reject(startFailed(error))));
  }

  /** Starts the stopped facilitator on its port; a failure (the port taken) is a 409 that says how to retry. */
  #startFacilitator(what: string): Promise<void> {
    return bounded(this.#timeoutMs, what, this.#facilitator.start().catch((error: unknown) => Promise.reject(startFailed(error))));
  }

  async status(): Promise<HarnessStatus> {
    const networks: HarnessStatus["networks"] = {};
    for (const network of this.#networks) {
      const { blockNumber, timestamp } = await head(this.#chains[network]!);
      networks[network] = { chainTime: timestamp, blockNumber, blocks: this.#stoppers.get(network)?.size ? "stopped" : "running" };
    }
    return { facilitator: { url: this.#facilitator.url, running: this.#facilitator.running() }, networks, faults: await this.faults() };
  }

  /**
   * The facilitator's lifecycle hooks the stack starts it with: `onAfterVerify` fires the armed `after-verify`
   * faults that match the payment (its payer and network), oldest first, before the verify is answered.
   */
  readonly hooks: FacilitatorHooks = {
    onAfterVerify: ({ result, authorization }) => this.#afterVerify({ network: result.network, authorization }),
    timeoutMs: AFTER_VERIFY_MS,
  };

  readonly #afterVerify = async (payment: ValidPayment): Promise<void> => {
    for (const fault of [...this.#live.values()]) {
      if (fault.info.state !== "armed" || !this.#matches(fault.spec, payment)) continue;
      fault.info.state = "active";
      try {
        await this.#apply(fault, payment);
      } catch (error) {
        fault.info.error = error instanceof Error ? error.message : String(error);
        this.#finish(fault.info.id, "failed");
      }
    }
  };

  /** Seconds the facilitator stays busy (its quota held at zero); `undefined` when it is not. */
  readonly closedFor = (): number | undefined => {
    let until = 0;
    for (const fault of this.#live.values()) {
      if (fault.spec.kind === "busy" && fault.info.state === "active" && fault.info.endsAt) until = Math.max(until, Date.parse(fault.info.endsAt));
    }
    const left = until - Date.now();
    return left > 0 ? left / 1000 : undefined;
  };

  /**
   * Ends every fault at once as the stack stops: timers cleared, RPC faults lifted (no call left
   * waiting), busy lifted; mining resumed so the chains stop cleanly. Nothing else is undone: the
   * chains go with the stack.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.rpc.close();
    for (const fault of this.#live.values()) clearTimeout(fault.timer);
    const stopped = [...this.#stoppers.entries()].filter(([, ids]) => ids.size > 0).map(([network]) => network);
    this.#live.clear();
    this.#stoppers.clear();
    this.#downs.clear();
    await Promise.all(stopped.map((network) => resumeMining(this.#chains[network]!).catch(() => undefined)));
  }

  #handle(fault: HeldFault): FaultHandle {
    const info = { ...fault.info };
    return { id: info.id, kind: info.kind, info, undo: () => this.undo(info.id) };
  }

  async #add(spec: ParsedFaultSpec): Promise<HeldFault> {
    this.#assertOpen();
    if (this.#live.size >= MAX_FAULTS) throw new HarnessControlError(409, `${MAX_FAULTS} faults are armed or in force already: undo some first (DELETE /harness/faults undoes them all)`);
    if ("network" in spec && spec.network !== undefined && !this.#chains[spec.network]) {
      throw new HarnessControlError(400, `network: ${spec.network} is not running in this stack (${this.#networks.join(", ")})`);
    }
    const id = `f${++this.#sequence}`;
    const fault: HeldFault = {
      spec,
      info: { id, kind: spec.kind, state: spec.kind !== "facilitator-down" && spec.trigger === "after-verify" ? "armed" : "active", spec: publicSpec(spec), description: describeFault(spec), createdAt: new Date().toISOString() },
    };
    if (fault.info.state === "armed") {
      this.#live.set(id, fault);
      return fault;
    }
    // Registered once in force: a fault that fails to take effect leaves nothing behind.
    await this.#apply(fault);
    if (fault.info.state === "active") this.#live.set(id, fault);
    return fault;
  }

  /** Makes the fault take effect (on `payment`'s network, for an `after-verify` one), and starts its clock. */
  async #apply(fault: HeldFault, payment?: ValidPayment): Promise<void> {
    const { spec } = fault;
    const networks = spec.kind === "facilitator-down" || spec.kind === "busy" ? [] : spec.network ? [spec.network] : payment ? [payment.network] : this.#networks;
    const undos: Array<() => Promise<void>> = [];
    const undoAll = async () => {
      for (const undo of undos.reverse()) await undo();
    };
    try {
      switch (spec.kind) {
        case "balance":
          for (const network of networks) {
            const before = await this.#onRunningChain(network, (chain) => setBalance(chain, spec.address, spec.amount));
            undos.push(() => this.#onRunningChain(network, (chain) => setBalance(chain, spec.address, before)).then(() => undefined));
          }
          break;
        case "pause":
          for (const network of networks) {
            const before = await this.#onRunningChain(network, (chain) => setPaused(chain, true));
            if (!before) undos.push(() => this.#onRunningChain(network, (chain) => setPaused(chain, false)).then(() => undefined));
          }
          break;
        case "blacklist":
          for (const network of networks) {
            const before = await this.#onRunningChain(network, (chain) => setBlacklisted(chain, spec.address, true));
            if (!before) undos.push(() => this.#onRunningChain(network, (chain) => setBlacklisted(chain, spec.address, false)).then(() => undefined));
          }
          break;
        case "authorization": {
          const target = payment ?? authorizationOfPayment(spec.payment!);
          if (spec.network && spec.network !== target.network) throw new HarnessControlError(400, `network: the payment is for ${target.network}, not ${spec.network}`);
          if (!this.#chains[target.network]) throw new HarnessControlError(400, `payment: ${target.network} is not running in this stack`);
          const txHash = await this.#onRunningChain(target.network, (chain) => spendAuthorization(chain, target.authorization as Authorization, spec.action, spec.privateKey as Hex | undefined));
          // A spent nonce stays spent: the fault is over as soon as it happened.
          fault.info = { ...fault.info, appliedAt: new Date().toISOString(), txHash };
          this.#finish(fault.info.id, "ended", fault);
          return;
        }
        case "time": {
          const chainTime = await this.#advance(networks, spec.seconds);
          // A chain's clock does not go back: over as soon as it happened.
          fault.info = { ...fault.info, appliedAt: new Date().toISOString(), chainTime };
          this.#finish(fault.info.id, "ended", fault);
          return;
        }
        case "rpc":
          this.rpc.add({
            id: fault.info.id,
            ...(spec.network ? { network: spec.network } : {}),
            mode: spec.mode,
            ...(spec.delayMs !== undefined ? { delayMs: spec.delayMs } : {}),
            ...(spec.methods ? { methods: new Set(spec.methods) } : {}),
            ...(spec.forCalls !== undefined ? { callsLeft: spec.forCalls } : {}),
          });
          undos.push(async () => void this.rpc.remove(fault.info.id));
          break;
        case "busy":
          // closedFor reads the fault's endsAt, set below.
          break;
        case "blocks":
          for (const network of networks) {
            const stoppers = this.#stoppers.get(network) ?? new Set<string>();
            if (stoppers.size === 0) await this.#onChain(network, stopMining);
            stoppers.add(fault.info.id);
            this.#stoppers.set(network, stoppers);
            undos.push(async () => {
              stoppers.delete(fault.info.id);
              if (stoppers.size === 0) await this.#onChain(network, resumeMining);
            });
          }
          break;
        case "lagging-backend":
        case "min-fee":
        case "no-replacement":
          for (const network of networks) undos.push(await this.#onChain(network, (chain) => holdNode(chain, fault.info.id, spec)));
          break;
        case "mempool-lost": {
          const dropped: string[] = [];
          for (const network of networks) dropped.push(...(await this.#onChain(network, losePool)));
          // A pool does not come back: over as soon as it happened.
          fault.info = { ...fault.info, appliedAt: new Date().toISOString(), dropped };
          return void this.#finish(fault.info.id, "ended", fault);
        }
        case "facilitator-down":
          if (this.#downs.size === 0) await bounded(this.#timeoutMs, "stopping the facilitator", this.#facilitator.stop());
          this.#downs.add(fault.info.id);
          undos.push(async () => {
            this.#downs.delete(fault.info.id);
            if (this.#downs.size === 0) await this.#startFacilitator("starting the facilitator");
          });
          break;
      }
    } catch (error) {
      await undoAll().catch(() => undefined);
      throw error;
    }
    fault.undo = undoAll;
    fault.info.appliedAt = new Date().toISOString();
    if ("forSeconds" in spec && spec.forSeconds !== undefined) {
      fault.info.endsAt = new Date(Date.now() + spec.forSeconds * 1000).toISOString();
      fault.timer = setTimeout(() => void this.#undo(fault).catch(() => undefined), spec.forSeconds * 1000);
      fault.timer.unref();
    }
  }

  /** Undoes a held fault once (a second call waits for the first); its report moves to the ended ones. */
  #undo(fault: HeldFault): Promise<void> {
    fault.undoing ??= (async () => {
      clearTimeout(fault.timer);
      try {
        await fault.undo?.();
        this.#finish(fault.info.id, "ended", fault);
      } catch (error) {
        fault.info.error = `undo failed: ${error instanceof Error ? error.message : String(error)}`;
        this.#finish(fault.info.id, "failed", fault);
        throw error;
      }
    })();
    return fault.undoing;
  }

  /** Moves a fault to the ended ones (the most recent {@link MAX_ENDED_FAULTS} are kept). */
  #finish(id: string, state: "ended" | "failed", held = this.#live.get(id)): void {
    if (!held) return;
    this.#live.delete(id);
    if (held.info.state === "ended" || held.info.state === "failed") return;
    held.info.state = state;
    held.info.endedAt = new Date().toISOString();
    clearTimeout(held.timer);
    this.#ended.unshift(held.info);
    this.#ended.length = Math.min(this.#ended.length, MAX_ENDED_FAULTS);
  }

  #matches(spec: ParsedFaultSpec, payment: ValidPayment): boolean {
    if ("network" in spec && spec.network !== undefined && spec.network !== payment.network) return false;
    const payer: Address | undefined = payerOf(spec);
    return payer === undefined || payer.toLowerCase() === payment.authorization.from.toLowerCase();
  }

  /** The networks a control names: `network` (which must run here), else every network of the stack. */
  #targets(network: string | undefined): NetworkName[] {
    if (network === undefined) return this.#networks;
    const name = parseNetwork(network);
    if (!name) throw new HarnessControlError(400, `network: unknown network "${network.slice(0, 64)}" (cronos-testnet, cronos-mainnet)`);
    if (!this.#chains[name]) throw new HarnessControlError(400, `network: ${name} is not running in this stack (${this.#networks.join(", ")})`);
    return [name];
  }

  /** Runs a transaction-sending action, refused while the chain's blocks are stopped (it would never be mined). */
  #onRunningChain<T>(network: NetworkName, action: (chain: LocalChain) => Promise<T>): Promise<T> {
    const stoppers = this.#stoppers.get(network);
    if (stoppers?.size) {
      return Promise.reject(new HarnessControlError(409, `blocks are stopped on ${network} (fault ${[...stoppers].join(", ")}): a transaction would not be mined; resume them first`));
    }
    return this.#onChain(network, action);
  }

  /** Runs `action` on the network's chain after the actions before it, bounded in time. */
  #onChain<T>(network: NetworkName, action: (chain: LocalChain) => Promise<T>): Promise<T> {
    const chain = this.#chains[network];
    if (!chain) return Promise.reject(new HarnessControlError(400, `network: ${network} is not running in this stack`));
    const previous = this.#queues.get(network) ?? Promise.resolve();
    const run = previous.catch(() => undefined).then(() => bounded(this.#timeoutMs, `${network}: the chain action`, action(chain)));
    this.#queues.set(network, run.catch(() => undefined));
    return run;
  }

  #assertOpen(): void {
    if (this.#closed) throw new HarnessControlError(409, "the stack is stopping: no more faults");
  }
}
