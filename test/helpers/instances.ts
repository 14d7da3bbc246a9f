import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { privateKeyToAccount } from "viem/accounts";
import type { Address, Hex } from "viem";
import type { LocalChain } from "../../src/harness/chain.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { makePayment } from "./facilitator.js";

// Helpers only: importing this file runs nothing.

const ROOT = new URL("../../", import.meta.url).pathname;

/** Hardhat's public test keys #9, #8, #7 (LOCAL-ONLY): the relayer keys several instances share. */
export const RELAYER_KEYS: Hex[] = [
  "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
  "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
  "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
];
export const RELAYER_ADDRESSES: Address[] = RELAYER_KEYS.map((key) => privateKeyToAccount(key).address);

/** A facilitator started as `npm run facilitator` starts it (its script under Node 22 with tsx). */
export interface FacilitatorProcess {
  url: string;
  child: ChildProcess;
  /** Its JSON log lines so far. */
  logs: Array<Record<string, unknown>>;
  stderr(): string;
  /** SIGKILL: no goodbye, leases and rows left behind. */
  kill(): Promise<void>;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<number | null>;
}

/** Starts one facilitator process with `env` and waits until it listens. */
export async function startFacilitatorProcess(env: Record<string, string>): Promise<FacilitatorProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "scripts/facilitator.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", PORT: "0", LOG_LEVEL: "info", TRUST_PROXY: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const logs: Array<Record<string, unknown>> = [];
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout! });
  const exited = once(child, "exit");
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`facilitator did not start in 60 s: ${stderr}`)), 60_000);
    lines.on("line", (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (entry.msg === "facilitator listening") {
        clearTimeout(timer);
        resolve(String(entry.url));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`facilitator exited ${code}: ${stderr}`));
    });
  });
  return {
    url,
    child,
    logs,
    stderr: () => stderr,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      const [code] = (await exited) as [number | null];
      return code;
    },
  };
}

/**
 * A client address for `X-Forwarded-For`: the instances run as if behind one balancer (`TRUST_PROXY=1`),
 * so each test request comes from a client of its own unless a test names one.
 */
const someClient = () => `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 254)}`;

/** POSTs a JSON body from client `ip`; resolves with status and parsed body (a dropped connection rejects). */
export async function post(url: string, path: string, body: unknown, ip = someClient()): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X402-Version": "1", "X-Forwarded-For": ip },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** GETs a JSON answer from client `ip`. */
export async function get(url: string, path: string, ip = someClient()): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, { headers: { "X-Forwarded-For": ip } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A signed payment by one of the chain's buyers to `payTo`. */
export function paymentOn(chain: LocalChain, buyer: number, payTo: Address, amount = 1_000_000n) {
  return makePayment(
    { publicClient: chain.publicClient, info: NETWORKS[chain.network], token: chain.token },
    { payer: privateKeyToAccount(chain.buyers[buyer]!.privateKey), payTo, amount },
  );
}

/** The relayer keys' confirmed transaction counts, summed. */
export async function relayerNonces(chain: LocalChain): Promise<number> {
  const counts = await Promise.all(RELAYER_ADDRESSES.map((address) => chain.publicClient.getTransactionCount({ address, blockTag: "latest" })));
  return counts.reduce((a, b) => a + b, 0);
}
