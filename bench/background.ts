// The CI recipe's two commands, timed as a CI job runs them: `cronos-x402 start --background` from the
// command to its return (the stack ready, the env file written) and `cronos-x402 stop` from the command to
// its return (the stack gone, its ports free). Each run is fresh processes; the figures are wall time.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

/** Runs the CLI from the sources (as `npm start` does); resolves with the wall time to its exit, rejecting on a non-zero status. */
function timed(args: readonly string[]): Promise<number> {
  const began = performance.now();
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli/bin.ts", ...args], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) =>
    child.once("exit", (code) => (code === 0 ? resolve(performance.now() - began) : reject(new Error(`cronos-x402 ${args.join(" ")} exited ${code}:\n${stderr}`)))),
  );
}

const figures = (label: string, ms: number[]) => {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  console.log(`${label.padEnd(44)} min ${sorted[0]!.toFixed(0).padStart(6)} ms   median ${at(0.5).toFixed(0).padStart(6)} ms   max ${sorted.at(-1)!.toFixed(0).padStart(6)} ms`);
};

const dir = await mkdtemp(join(tmpdir(), "x402-bench-background-"));
const starts: number[] = [];
const stops: number[] = [];
try {
  for (let i = 0; i < RUNS; i++) {
    const stateDir = join(dir, `run-${i}`);
    starts.push(await timed(["start", "--background", "--write-env", join(stateDir, "env"), "--state-dir", stateDir, "--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"]));
    stops.push(await timed(["stop", "--state-dir", stateDir]));
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
console.log(`${RUNS} runs, both networks, 3 buyers each, from the TypeScript sources (tsx)`);
figures("start --background (command to return, ready)", starts);
figures("stop (command to return, everything gone)", stops);
