import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import type { NetworkName } from "../protocol/networks.js";

// Before forking, the fork source is asked for its chain id and head directly: EDR itself retries an
// unreachable URL for about 50 s.

/** Asks `url` for its chain id and latest block, so an unreachable fork fails in seconds with a clear reason (EDR retries for ~50 s). */
export async function probeForkUrl(network: NetworkName, url: string): Promise<{ chainId: number; blockNumber: bigint }> {
  const chainId = await askOnce(url, "eth_chainId");
  if (typeof chainId !== "bigint") throw new Error(`${network}: cannot fork ${url}: ${chainId.reason}`);
  const blockNumber = await askOnce(url, "eth_blockNumber");
  if (typeof blockNumber !== "bigint") throw new Error(`${network}: cannot fork ${url}: ${blockNumber.reason}`);
  return { chainId: Number(chainId), blockNumber };
}

/** One JSON-RPC call whose result is a hex quantity; the reason when there is no such answer. */
async function askOnce(url: string, method: string): Promise<bigint | { reason: string }> {
  // node:http rather than fetch: fetch refuses some ports ("bad ports") that EDR would use fine.
  const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: [] });
  const target = new URL(url);
  const request = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    const req = request(
      target,
      { method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }, timeout: 10_000 },
      (res) => {
        let text = "";
        res.setEncoding("utf8").on("data", (chunk: string) => (text += chunk));
        res.on("end", () => {
          try {
            const result = (JSON.parse(text) as { result?: unknown }).result;
            if (typeof result === "string") return resolve(BigInt(result));
          } catch {
            // Not JSON (or not a quantity): reported below with the status.
          }
          resolve({ reason: `HTTP ${res.statusCode}, no ${method} result` });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("no answer within 10 s")));
    req.on("error", (error: NodeJS.ErrnoException) => resolve({ reason: error.code ?? error.message }));
    req.end(body);
  });
}
