import { availableParallelism } from "node:os";
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from "node:worker_threads";
import type { Address, Hex } from "viem";
import { BATCH_ANSWER_BYTES, BATCH_ITEM_BYTES, recoverBatch } from "./recovery-batch.js";
import { addressText, recoverAddressBytes, writeSignature } from "./secp256k1.js";

/** A signer's address (lower case) or undefined (none the token would accept): at once, or once a worker answered. */
export type Recovered = Address | undefined | Promise<Address | undefined>;

/** Recovers the signer of an EIP-3009 digest's `r‖s‖v` signature, as {@link recoverSigner} does. */
export interface SignerRecovery {
  recover(digest: Uint8Array, signature: Hex): Recovered;
}

/**
 * Where a recovery ran: `inline` on the calling thread (nothing in the pool, first of its turn of the event
 * loop), `worker` on a worker thread, `starting` inline while no worker is ready yet, `full` inline because
 * the queue is at its bound, `late` inline because its worker had not answered within `lateMs` (a worker
 * starved of CPU on a busy machine), `rescued` inline after its worker died or hung.
 */
export type RecoveryPath = "inline" | "worker" | "starting" | "full" | "late" | "rescued";
/** Why a worker was lost: it exited (crashed) or did not answer within the time bound. */
export type WorkerLoss = "exited" | "hung";

/** Options of {@link RecoveryPool}. */
export interface RecoveryPoolOptions {
  /** Worker threads; default: the machine's cores less the main thread's (`os.availableParallelism() - 1`). 0: every recovery inline. */
  workers?: number;
  /** Recoveries waiting or in workers at most; beyond, the calling thread recovers. Default 4,096. */
  maxQueue?: number;
  /** A worker that has not answered a batch in this long is ended (and replaced); its batches recovered inline. Default 1,000 ms. */
  timeoutMs?: number;
  /** A batch its worker has not answered in this long is recovered here (the worker's answer, later, is dropped). Default 10 ms. */
  lateMs?: number;
  /** Whether a recovery that finds the pool idle, first of its turn, runs on the calling thread (default true; false: tests of the workers). */
  inlineWhenIdle?: boolean;
  /** Items per message to a worker at most; a batch this full is sent at once. Default 16. */
  maxBatch?: number;
  /** The worker's entry (default recovery-worker.ts beside this file): tests wrap it to make a worker die or hang. */
  script?: URL;
  /** Told what ran where (metrics): once per recovery on the calling thread, once per batch a worker answered or was rescued. */
  onRecovered?: (path: RecoveryPath, count: number) => void;
  /** Told when a worker is lost (metrics, a log line). */
  onWorkerLost?: (why: WorkerLoss) => void;
}

interface Batch {
  id: number;
  items: Uint8Array;
  resolvers: Array<(signer: Address | undefined) => void>;
  sentAt: number;
  /** Answered already (by this thread, its worker being late): the worker's answer, when it comes, is only taken off. */
  answered: boolean;
}

/** What a worker says on its answers port: it is ready, or a batch's answers. */
type WorkerMessage = { ready?: true; id?: number; answers?: Uint8Array };

interface Slot {
  worker: Worker;
  /** The worker's answers come on this port: taken as they arrive, and also at once whenever a recovery is asked. */
  answers: MessagePort;
  ready: boolean;
  gone: boolean;
  /** Batches sent and not answered, oldest first (a Map keeps insertion order). */
  inFlight: Map<number, Batch>;
  items: number;
  timer: NodeJS.Timeout | undefined;
}

const FROM_SOURCE = import.meta.url.endsWith(".ts");
const DEFAULT_SCRIPT = new URL(`./recovery-worker.${FROM_SOURCE ? "ts" : "js"}`, import.meta.url);
const MAX_RESPAWN_DELAY_MS = 30_000;

/**
 * Signature recovery on every core: a pool of worker threads (`node:worker_threads`) sized to the machine,
 * each running native libsecp256k1 over batches. The calling (main) thread only copies a digest and a
 * signature into the turn's batch; a message carries a batch to a worker when it holds `maxBatch`
 * recoveries, or once the turn's I/O is done.
 *
 * - **Idle, inline**: a recovery that finds nothing queued and is the first of its turn runs on the calling
 *   thread, synchronously (a worker hop costs two thread wake-ups, more than the recovery at one client).
 *   Workers start at the first moment two recoveries are due at once; until one is ready, recoveries run inline.
 * - **Bounded**: at most `maxQueue` recoveries wait or run in workers; beyond, the calling thread recovers
 *   (as before the pool: the answer is the same, only later; a 503 would refuse an honest payment the process
 *   can answer). A batch its worker has not answered within `lateMs` (a worker starved of CPU on a busy
 *   machine) is recovered inline, and the worker's answer dropped when it comes. A worker that answers
 *   nothing within `timeoutMs` is ended; a worker that exits is lost: either way its unanswered batches are
 *   recovered inline, each exactly once, and a new worker is started (after a growing pause when workers
 *   keep failing).
 */
export class RecoveryPool implements SignerRecovery {
  readonly size: number;
  readonly maxQueue: number;
  readonly timeoutMs: number;
  readonly lateMs: number;
  readonly maxBatch: number;
  readonly #script: URL;
  readonly #options: RecoveryPoolOptions;
  #slots: Slot[] = [];
  #started = false;
  #closed = false;
  /** The turn's batch, before it is sent: items written in place, and their resolvers. */
  #staging = Buffer.alloc(64 * BATCH_ITEM_BYTES);
  #pending: Array<(signer: Address | undefined) => void> = [];
  /** Recoveries pending or in flight. */
  #queued = 0;
  #inlineThisTurn = false;
  #turn: NodeJS.Immediate | undefined;
  #nextId = 1;
  #failures = 0;
  #respawns = new Set<NodeJS.Timeout>();

  constructor(options: RecoveryPoolOptions = {}) {
    this.size = Math.max(0, options.workers ?? availableParallelism() - 1);
    this.maxQueue = Math.max(1, options.maxQueue ?? 4_096);
    this.timeoutMs = options.timeoutMs ?? 1_000;
    this.lateMs = Math.min(options.lateMs ?? 10, this.timeoutMs);
    this.maxBatch = Math.max(1, options.maxBatch ?? 16);
    this.#script = options.script ?? DEFAULT_SCRIPT;
    this.#options = options;
  }

  /** Workers running, ready, and recoveries pending or in flight. */
  get state(): { workers: number; ready: number; queued: number } {
    return { workers: this.#slots.length, ready: this.#slots.filter((slot) => slot.ready).length, queued: this.#queued };
  }

  recover(digest: Uint8Array, signature: Hex): Recovered {
    if (digest.length !== 32) throw new TypeError(`a digest is 32 bytes, got ${digest.length}`);
    // Answers already in: their verifies go on as soon as the current callback ends, not a whole turn of the loop later.
    if (this.#queued > 0) this.#drain();
    const at = this.#pending.length * BATCH_ITEM_BYTES;
    if (at + BATCH_ITEM_BYTES > this.#staging.length) this.#grow();
    if (!writeSignature(signature, this.#staging, at + 32)) return undefined;
    const path = this.#route();
    if (path !== "worker") {
      this.#options.onRecovered?.(path, 1);
      const signer = recoverAddressBytes(digest, this.#staging, at + 32);
      return signer && addressText(signer);
    }
    this.#staging.set(digest, at);
    this.#queued++;
    const answer = new Promise<Address | undefined>((resolve) => this.#pending.push(resolve));
    // A full batch goes at once (a worker starts on it while this thread reads more requests); the rest after the turn's I/O.
    if (this.#pending.length >= this.maxBatch) this.#flush();
    else this.#schedule();
    return answer;
  }

  /** Ends the workers; recoveries in flight are answered inline, later ones run inline. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#turn) clearImmediate(this.#turn);
    this.#turn = undefined;
    this.#flush();
    for (const timer of this.#respawns) clearTimeout(timer);
    this.#respawns.clear();
    await Promise.all([...this.#slots].map((slot) => this.#lose(slot, undefined)));
  }

  #route(): RecoveryPath {
    if (this.#closed || this.size === 0) return "inline";
    if (this.#queued === 0 && !this.#inlineThisTurn && this.#options.inlineWhenIdle !== false) {
      this.#inlineThisTurn = true;
      this.#schedule();
      return "inline";
    }
    if (!this.#started) this.#start();
    if (!this.#slots.some((slot) => slot.ready)) return "starting";
    if (this.#queued >= this.maxQueue) return "full";
    return "worker";
  }

  #grow(): void {
    const larger = Buffer.alloc(this.#staging.length * 2);
    this.#staging.copy(larger);
    this.#staging = larger;
  }

  /** Once per turn of the event loop (after its I/O): the turn's batch to the workers. */
  #schedule(): void {
    this.#turn ??= setImmediate(() => {
      this.#turn = undefined;
      this.#inlineThisTurn = false;
      this.#flush();
    });
  }

  #flush(): void {
    const resolvers = this.#pending;
    if (resolvers.length === 0) return;
    const items = this.#staging.subarray(0, resolvers.length * BATCH_ITEM_BYTES);
    this.#pending = [];
    const ready = this.#slots.filter((slot) => slot.ready);
    if (ready.length === 0 || this.#closed) {
      // Every worker went away since these were queued: the calling thread recovers them.
      this.#answer(recoverBatch(items), resolvers, "rescued");
      return;
    }
    const per = Math.min(this.maxBatch, Math.ceil(resolvers.length / ready.length));
    for (let start = 0; start < resolvers.length; start += per) {
      const end = Math.min(resolvers.length, start + per);
      const slot = ready.reduce((least, candidate) => (candidate.items < least.items ? candidate : least));
      // A copy of exactly these bytes (a view would clone the whole staging buffer); kept for a rescue.
      const batch: Batch = { id: this.#nextId++, items: new Uint8Array(items.subarray(start * BATCH_ITEM_BYTES, end * BATCH_ITEM_BYTES)), resolvers: resolvers.slice(start, end), sentAt: performance.now(), answered: false };
      // Answers due keep the process alive (an idle pool never does).
      if (slot.inFlight.size === 0) slot.answers.ref();
      slot.inFlight.set(batch.id, batch);
      slot.items += batch.resolvers.length;
      slot.worker.postMessage({ id: batch.id, items: batch.items });
      if (!slot.timer) this.#arm(slot);
    }
  }

  /** A sent batch's answers, given once (whoever comes first: its worker, or this thread when the worker is late or lost). */
  #answerBatch(batch: Batch, answers: () => Uint8Array, path: RecoveryPath): void {
    if (batch.answered) return;
    batch.answered = true;
    this.#answer(answers(), batch.resolvers, path);
  }

  #answer(answers: Uint8Array, resolvers: Batch["resolvers"], path: RecoveryPath): void {
    this.#queued -= resolvers.length;
    this.#options.onRecovered?.(path, resolvers.length);
    for (let i = 0; i < resolvers.length; i++) {
      const at = i * BATCH_ANSWER_BYTES;
      resolvers[i]!(answers[at] === 1 ? addressText(answers.subarray(at + 1, at + BATCH_ANSWER_BYTES)) : undefined);
    }
  }

  /** The time bounds: a timer at the next deadline of the worker's batches (a late one's, else the hang's). */
  #arm(slot: Slot): void {
    clearTimeout(slot.timer);
    slot.timer = undefined;
    let oldest: Batch | undefined;
    let late: Batch | undefined;
    for (const batch of slot.inFlight.values()) {
      oldest ??= batch;
      if (!batch.answered) {
        late = batch;
        break;
      }
    }
    if (!oldest) return;
    const deadline = Math.min(oldest.sentAt + this.timeoutMs, late ? late.sentAt + this.lateMs : Infinity);
    slot.timer = setTimeout(() => this.#overdue(slot), Math.max(0, deadline - performance.now()));
    slot.timer.unref();
  }

  /** A worker past a deadline: hung (nothing answered in `timeoutMs`), or late (its batches past `lateMs` answered here). */
  #overdue(slot: Slot): void {
    const now = performance.now();
    const oldest = slot.inFlight.values().next().value;
    if (oldest && now - oldest.sentAt >= this.timeoutMs) {
      void this.#lose(slot, "hung");
      return;
    }
    for (const batch of slot.inFlight.values()) {
      if (now - batch.sentAt < this.lateMs) break;
      this.#answerBatch(batch, () => recoverBatch(batch.items), "late");
    }
    this.#arm(slot);
  }

  #start(): void {
    this.#started = true;
    for (let i = 0; i < this.size; i++) this.#spawn();
  }

  #spawn(): void {
    const fromSource = this.#script.pathname.endsWith(".ts");
    const hasLoader = process.execArgv.some((arg) => arg.includes("tsx"));
    const { port1: answers, port2 } = new MessageChannel();
    const worker = new Worker(this.#script, {
      // From the TypeScript sources (a clone, the tests), the worker loads them as the process does.
      ...(fromSource && !hasLoader ? { execArgv: [...process.execArgv, "--import", "tsx"] } : {}),
      workerData: { answers: port2 },
      transferList: [port2],
      // Batches are small: a worker holding more than this is broken.
      resourceLimits: { maxOldGenerationSizeMb: 128 },
    });
    const slot: Slot = { worker, answers, ready: false, gone: false, inFlight: new Map(), items: 0, timer: undefined };
    this.#slots.push(slot);
    answers.on("message", (message: WorkerMessage) => this.#received(slot, message));
    worker.on("error", () => void this.#lose(slot, "exited"));
    worker.on("exit", () => void this.#lose(slot, "exited"));
    // After the listeners (a "message" listener refs its port again): a pool never keeps a process alive.
    answers.unref();
    worker.unref();
  }

  /** Every answer the workers have sent and this thread has not taken yet, taken now. */
  #drain(): void {
    for (const slot of this.#slots) {
      for (let message = receiveMessageOnPort(slot.answers); message; message = receiveMessageOnPort(slot.answers)) {
        this.#received(slot, message.message as WorkerMessage);
      }
    }
  }

  #received(slot: Slot, message: WorkerMessage): void {
    if (slot.gone) return;
    if (message.ready) {
      slot.ready = true;
      return;
    }
    const batch = slot.inFlight.get(message.id!);
    if (!batch || !message.answers) return;
    slot.inFlight.delete(batch.id);
    slot.items -= batch.resolvers.length;
    if (slot.inFlight.size === 0) slot.answers.unref();
    this.#failures = 0;
    this.#answerBatch(batch, () => message.answers!, "worker");
    this.#arm(slot);
  }

  /** A worker gone (`why`), or closed (undefined): its unanswered batches recovered here, each once; a new worker unless closing. */
  async #lose(slot: Slot, why: WorkerLoss | undefined): Promise<void> {
    if (slot.gone) return;
    slot.gone = true;
    clearTimeout(slot.timer);
    this.#slots = this.#slots.filter((other) => other !== slot);
    slot.answers.close();
    for (const batch of slot.inFlight.values()) this.#answerBatch(batch, () => recoverBatch(batch.items), "rescued");
    slot.inFlight.clear();
    if (why) {
      this.#options.onWorkerLost?.(why);
      this.#failures++;
      if (!this.#closed) {
        // A worker that keeps failing (it cannot load, say) is started again less and less often; inline meanwhile.
        const delay = this.#failures <= 1 ? 0 : Math.min(MAX_RESPAWN_DELAY_MS, 100 * 2 ** this.#failures);
        const timer = setTimeout(() => {
          this.#respawns.delete(timer);
          if (!this.#closed) this.#spawn();
        }, delay);
        timer.unref();
        this.#respawns.add(timer);
      }
    }
    await slot.worker.terminate();
  }
}
