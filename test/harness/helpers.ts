import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

// Helpers only: importing this file runs nothing (hardhat-mocha loads every file under test/).

/** The kit's root directory. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** A JSON-RPC response as it comes over the wire. */
export interface WireResponse {
  jsonrpc: string;
  id: number | string | null;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
}

/** POSTs a JSON-RPC body (one request or a batch) with fetch, like any client in another process. */
export async function postJson(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

/** Calls one JSON-RPC method over HTTP and returns its result (throws on a JSON-RPC error). */
export async function rpc<T = unknown>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const { json } = await postJson(url, { jsonrpc: "2.0", id: 1, method, params });
  const response = json as WireResponse;
  if (response.error) throw new Error(`${method}: ${response.error.message}`);
  return response.result as T;
}

/** ABI-encoded `balanceOf(address)` call data. */
export function balanceOfData(address: string): string {
  return `0x70a08231${address.slice(2).toLowerCase().padStart(64, "0")}`;
}

/** True when `port` can be bound on 127.0.0.1 right now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen({ port, host: "127.0.0.1", exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** Holds a port on 127.0.0.1 (0 = any) until `release` is called. */
export async function occupyPort(port = 0): Promise<{ port: number; release(): Promise<void> }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host: "127.0.0.1" }, () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  return { port: address.port, release: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passes. */
export async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  return check();
}

/** A spawned `scripts/start.ts`, with its stdout and stderr collected. */
export interface StartProcess {
  child: ChildProcessWithoutNullStreams;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first stdout line (rejects if the process exits first or `timeoutMs` passes). */
  firstLine(timeoutMs: number): Promise<string>;
  /** Resolves with the exit code (or the signal name) once the process has exited. */
  exited: Promise<number | NodeJS.Signals>;
}

/**
 * Runs `tsx scripts/start.ts ...args` as a separate process, as a CI suite in another language would
 * run `npm start -- --json`: node_modules/.bin first on PATH, so tsx runs on the Node 22 from there.
 */
export function spawnStart(args: readonly string[], env: NodeJS.ProcessEnv = {}, options: { readStderr?: boolean } = {}): StartProcess {
  const bin = join(ROOT, "node_modules", ".bin");
  const child = spawn(join(bin, "tsx"), ["scripts/start.ts", ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, PATH: `${bin}${delimiter}${process.env.PATH ?? ""}` },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  // readStderr false: like a parent that only reads stdout, the pipe is left to fill up.
  if (options.readStderr ?? true) child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
  const exited = new Promise<number | NodeJS.Signals>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? -1)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    firstLine(timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => finish(new Error(`no stdout line within ${timeoutMs} ms; stderr:\n${err}`)), timeoutMs);
        const onData = () => {
          const newline = out.indexOf("\n");
          if (newline >= 0) finish(undefined, out.slice(0, newline));
        };
        const onExit = () => finish(new Error(`exited before printing a line; stderr:\n${err}`));
        function finish(error?: Error, line?: string) {
          clearTimeout(timer);
          child.stdout.off("data", onData);
          child.off("exit", onExit);
          if (error) reject(error);
          else resolve(line!);
        }
        child.stdout.on("data", onData);
        child.once("exit", onExit);
        onData();
      });
    },
  };
}

/**
 * The processes (pid and command line) whose environment holds `name=value`: everything a command
 * spawned with that variable started, however deep and whoever adopted it since (Linux /proc).
 */
export function processesWithEnv(name: string, value: string): Array<{ pid: number; command: string }> {
  const wanted = `${name}=${value}`;
  const found: Array<{ pid: number; command: string }> = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // A zombie's environment reads empty: only running processes match.
      if (!readFileSync(`/proc/${entry}/environ`, "utf8").split("\0").includes(wanted)) continue;
      found.push({ pid: Number(entry), command: readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0").join(" ").trim() });
    } catch {
      // exited meanwhile, or not ours to read
    }
  }
  return found;
}
