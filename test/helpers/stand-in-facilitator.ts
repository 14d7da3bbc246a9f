import type { IncomingHttpHeaders } from "node:http";
import express from "express";
import { listen } from "./http.js";
import { VECTOR_PAYEE, VECTOR_SIGNER } from "./vectors.js";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** How the stand-in answers one operation. */
export type StandInAnswer =
  /** JSON body with a status (default 200). */
  | { kind: "json"; body: unknown; status?: number; headers?: Record<string, string> }
  /** A raw body (garbage, HTML error pages…). */
  | { kind: "text"; body: string; status?: number; contentType?: string }
  /** Never answers (tests the client's time-out). */
  | { kind: "hang" };

/** A request the stand-in received. */
export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: IncomingHttpHeaders;
  /** The raw body text. */
  text: string;
  /** The body parsed as JSON, or `undefined` when it is empty or not JSON. */
  body: unknown;
}

/** A loopback server answering programmed facilitator responses. */
export interface StandInFacilitator {
  url: string;
  requests: RecordedRequest[];
  /** `settlements` is the status lookup by authorization (`GET /v2/x402/settlements?…`). */
  answers: { supported: StandInAnswer; verify: StandInAnswer; settle: StandInAnswer; settlements: StandInAnswer };
  /** Forgets recorded requests and restores the default answers (valid, settled, lookups 404). */
  reset(): void;
  close(): Promise<void>;
}

/** A well-formed `payment.settled` answer for vector A. */
export const SETTLED = {
  x402Version: 1,
  event: "payment.settled",
  network: "cronos-testnet",
  timestamp: "2030-01-01T00:00:00.000Z",
  txHash: `0x${"ab".repeat(32)}`,
  from: VECTOR_SIGNER.address,
  to: VECTOR_PAYEE,
  value: "1000000",
  blockNumber: 4242,
} as const;

export const VALID = { isValid: true, invalidReason: null } as const;

export const SUPPORTED = {
  kinds: [
    { x402Version: 1, scheme: "exact", network: "cronos-testnet" },
    { x402Version: 1, scheme: "exact", network: "cronos-mainnet" },
  ],
} as const;

/** `payment.failed` with `error`. */
export function settleFailed(error: string) {
  return { x402Version: 1, event: "payment.failed", network: "cronos-testnet", timestamp: "2030-01-01T00:00:00.000Z", error };
}

export const json = (body: unknown, status?: number, headers?: Record<string, string>): StandInAnswer => ({ kind: "json", body, status, ...(headers ? { headers } : {}) });

const defaultAnswers = () => ({ supported: json(SUPPORTED), verify: json(VALID), settle: json(SETTLED), settlements: json({ error: "Not found" }, 404) });

/** Starts a stand-in facilitator; it answers valid / settled until told otherwise through `answers`. */
export async function startStandInFacilitator(): Promise<StandInFacilitator> {
  const requests: RecordedRequest[] = [];
  const answers = defaultAnswers();
  const app = express();
  app.use(express.text({ type: () => true }));
  app.all("/v2/x402/:operation", (req, res) => {
    const text = typeof req.body === "string" ? req.body : "";
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    requests.push({ method: req.method, path: req.path, query: req.query as Record<string, string>, headers: req.headers, text, body });
    const operation = req.params.operation;
    const answer =
      operation === "verify" || operation === "settle" || operation === "supported" || operation === "settlements" ? answers[operation] : undefined;
    if (!answer) {
      res.status(404).json({ error: "Not found" });
      return;
    }
    switch (answer.kind) {
      case "json":
        res.status(answer.status ?? 200).set(answer.headers ?? {}).json(answer.body);
        return;
      case "text":
        res.status(answer.status ?? 200).type(answer.contentType ?? "text/plain").send(answer.body);
        return;
      case "hang":
        return;
    }
  });
  const server = await listen(app);
  return {
    url: server.url,
    requests,
    answers,
    reset() {
      requests.length = 0;
      Object.assign(answers, defaultAnswers());
    },
    close: server.close,
  };
}
