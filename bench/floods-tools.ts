// The tools of bench/floods.ts: its requests, scrapes, signed bodies, facilitator processes and chain reads.
import { readFileSync } from "node:fs";
import { request, type Agent, type IncomingMessage } from "node:http";
import { getAddress, type Address, type Hex } from "viem";
import { tokenAbi } from "../src/chain/token-abi.js";
import { ACCOUNT_INDEX, localAccount } from "../src/harness/accounts.js";
import type { LocalChain } from "../src/harness/chain.js";
import { startFacilitatorProcess, type FacilitatorProcess } from "../src/harness/cluster.js";
import { signBodies } from "./sign.js";
import { percentile } from "./stack.js";

export const RELAYER_KEY = localAccount(ACCOUNT_INDEX.relayer).privateKey;
export const PAY_TO = getAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const ms = (value: number) => `${Math.round(value)} ms`;
export const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;

/** Resident memory of a process (bytes), from /proc. */
export function rss(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))!;
  return Number(line.split(/\s+/)[1]) * 1024;
}

export function latencySummary(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  return `n ${sorted.length}, p50 ${ms(percentile(sorted, 50))}, p99 ${ms(percentile(sorted, 99))}, max ${ms(sorted.at(-1) ?? NaN)}`;
}

export interface Answer {
  status: number;
  text: string;
  ms: number;
}

/** One HTTP request through `agent` (keep-alive), from `localAddress` when given. */
export function send(url: string, path: string, options: { method?: string; body?: string; type?: string; agent?: Agent; localAddress?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const target = new URL(url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        path,
        method: options.method ?? (options.body === undefined ? "GET" : "POST"),
        ...(options.agent ? { agent: options.agent } : {}),
        ...(options.localAddress ? { localAddress: options.localAddress } : {}),
        headers: { ...(options.body === undefined ? {} : { "Content-Type": options.type ?? "application/json" }), ...options.headers },
      },
      (res: IncomingMessage) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (text += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text, ms: performance.now() - started }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

/** The value of one series in the process's Prometheus scrape (0 when absent). */
export async function series(facilitator: FacilitatorProcess, name: string): Promise<number> {
  const scrape = (await send(facilitator.metricsUrl!.replace(/\/metrics$/, ""), "/metrics")).text;
  const line = scrape.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

export function bodies(chain: LocalChain, count: number, options: { wrongKey?: boolean; value?: bigint; payTo?: Address } = {}): string[] {
  const other = localAccount(ACCOUNT_INDEX.relayer + 10).privateKey;
  return signBodies({
    count,
    buyers: chain.buyers.map((buyer) => ({ address: buyer.address, privateKey: options.wrongKey ? other : buyer.privateKey })),
    network: "cronos-testnet",
    chainId: chain.chainId,
    token: chain.token,
    domain: chain.domain,
    payTo: options.payTo ?? PAY_TO,
    value: options.value ?? 1_000n,
    validBefore: BigInt(Math.floor(Date.now() / 1000) + 3_600),
  });
}

export function facilitatorOn(chain: LocalChain, env: Record<string, string>): Promise<FacilitatorProcess> {
  return startFacilitatorProcess({
    CRONOS_TESTNET_RPC_URL: chain.rpcUrl,
    RELAYER_PRIVATE_KEY: RELAYER_KEY,
    RATE_LIMIT_VERIFY_PER_MINUTE: "0",
    RATE_LIMIT_SETTLE_PER_MINUTE: "0",
    RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "0",
    RATE_LIMIT_PUBLIC_PER_MINUTE: "0",
    LOG_LEVEL: "warn",
    ...env,
  });
}

/** Whether an authorization is used on chain, and the relayer's mined nonce. */
export const used = (chain: LocalChain, body: string) => {
  const header = JSON.parse(Buffer.from(JSON.parse(body).paymentHeader as string, "base64").toString()) as { payload: { from: Address; nonce: Hex } };
  const { from, nonce } = header.payload;
  return chain.publicClient.readContract({ address: chain.token, abi: tokenAbi, functionName: "authorizationState", args: [from, nonce] });
};
export const relayerNonce = (chain: LocalChain) => chain.publicClient.getTransactionCount({ address: localAccount(ACCOUNT_INDEX.relayer).address, blockTag: "latest" });
