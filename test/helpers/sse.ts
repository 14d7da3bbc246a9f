import { get, type IncomingHttpHeaders, type IncomingMessage } from "node:http";
import { closeAfter } from "./teardown.js";
import { WAIT_MS } from "./wait.js";

// Helpers only: importing this file runs nothing.

/** One server-sent event as a browser's EventSource would see it. */
export interface SseEvent {
  id?: string;
  event?: string;
  data?: string;
  retry?: number;
}

/** An open SSE stream over real HTTP, read as the spec describes (blocks separated by a blank line). */
export interface SseStream {
  status: number;
  headers: IncomingHttpHeaders;
  /** Every event (and retry line) received so far, in order. */
  events: SseEvent[];
  /** The raw text received so far. */
  text(): string;
  /** Resolves with the first event (from the start) that `match` accepts. */
  next(match: (event: SseEvent) => boolean): Promise<SseEvent>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

/** Opens `url` as an event stream (e.g. with a `Last-Event-ID` header). */
export function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const request = get(url, { headers: { Accept: "text/event-stream", ...headers } }, (res: IncomingMessage) => {
      let raw = "";
      let pending = "";
      const events: SseEvent[] = [];
      const waiters: Array<{ match: (event: SseEvent) => boolean; resolve: (event: SseEvent) => void }> = [];
      const ended = new Promise<void>((done) => res.once("end", () => done()).once("close", () => done()));
      res.setEncoding("utf8").on("data", (chunk: string) => {
        raw += chunk;
        pending += chunk;
        let cut: number;
        while ((cut = pending.indexOf("\n\n")) >= 0) {
          const block = pending.slice(0, cut);
          pending = pending.slice(cut + 2);
          const event: SseEvent = {};
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "id") event.id = value;
            else if (field === "event") event.event = value;
            else if (field === "data") event.data = event.data === undefined ? value : `${event.data}\n${value}`;
            else if (field === "retry") event.retry = Number(value);
          }
          if (Object.keys(event).length === 0) continue;
          events.push(event);
          for (const waiter of [...waiters]) {
            if (waiter.match(event)) {
              waiters.splice(waiters.indexOf(waiter), 1);
              waiter.resolve(event);
            }
          }
        }
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        events,
        text: () => raw,
        next(match) {
          const found = events.find(match);
          if (found) return Promise.resolve(found);
          return new Promise((resolveEvent, rejectEvent) => {
            // A deadline that fails loudly, with what came instead.
            const timer = setTimeout(() => {
              waiters.splice(waiters.indexOf(waiter), 1);
              rejectEvent(new Error(`no matching event on ${url} within ${WAIT_MS} ms (${match.toString().slice(0, 200)}); ${events.length} events came, the last: ${JSON.stringify(events.at(-1))}`));
            }, WAIT_MS);
            const waiter = {
              match,
              resolve: (event: SseEvent) => {
                clearTimeout(timer);
                resolveEvent(event);
              },
            };
            waiters.push(waiter);
          });
        },
        ended,
        close: () => request.destroy(),
      });
    });
    request.once("error", reject);
    closeAfter(`event stream ${url}`, () => void request.destroy());
  });
}

/** The feed row an `outcome` event carries. */
export function rowOf(event: SseEvent): Record<string, unknown> {
  return JSON.parse(event.data ?? "null") as Record<string, unknown>;
}
