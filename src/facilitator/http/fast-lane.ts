import type { IncomingMessage } from "node:http";
import type { StageClock } from "../../settlement/stages.js";

/**
 * Whether a POST's headers are the plain case that needs none of the JSON middleware's generality:
 * `Content-Type: application/json` (or with `; charset=utf-8`), no `Content-Encoding` or
 * `Transfer-Encoding`, and a `Content-Length` of 1 to `limit` bytes. Anything else (another charset, a
 * compressed or chunked body, no length, too long) goes the general way, which answers it as it always has.
 */
export function plainJsonPost(req: IncomingMessage, limit: number): boolean {
  const type = req.headers["content-type"];
  if (type === undefined) return false;
  if (type !== "application/json") {
    const lower = type.toLowerCase();
    if (lower !== "application/json" && lower !== "application/json; charset=utf-8") return false;
  }
  if (req.headers["content-encoding"] !== undefined || req.headers["transfer-encoding"] !== undefined) return false;
  const declared = req.headers["content-length"];
  if (declared === undefined || declared.length > 10 || !/^[1-9]\d*$/.test(declared)) return false;
  return Number(declared) <= limit;
}

/** A body read whole: its JSON, or `unreadable` when it is not JSON. */
export type ReadBody = { ok: true; json: unknown } | { ok: false };

/**
 * Reads a {@link plainJsonPost}'s body and parses it as the JSON middleware (`strict: false`) would: UTF-8,
 * a leading byte-order mark dropped, an empty text read as `{}`, any JSON value accepted. `done` is called
 * once, with the JSON or `ok: false`, when the body has arrived; never when the client goes away first
 * (the HTTP parser ends the body at its Content-Length, so a complete body is never longer). `stages` times
 * the decode and parse as `bodyParse`.
 */
export function readJsonBody(req: IncomingMessage, done: (body: ReadBody) => void, stages?: StageClock): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (chunk: Buffer) => {
    chunks.push(chunk);
    size += chunk.length;
  });
  // An aborted request errors here: nothing to answer (as the JSON middleware's `request.aborted`).
  req.on("error", () => {});
  req.on("end", () => {
    const since = stages ? stages.start() : 0;
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
    let text = bytes.toString("utf8");
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    let json: unknown;
    try {
      json = text.length === 0 ? {} : JSON.parse(text);
    } catch {
      done({ ok: false });
      return;
    }
    if (stages) stages.stop("bodyParse", since);
    done({ ok: true, json });
  });
}
