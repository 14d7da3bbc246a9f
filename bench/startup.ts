// Start-up time of the local stack (`npm start -- --json`): cold (contracts not yet compiled) and
// warm (compiled), measured to the JSON line from a fresh process each time.
import { rm } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { startStackProcess } from "./stack.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const ARGS = ["--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"];

async function once(label: string) {
  const stack = await startStackProcess(ARGS);
  await stack.stop();
  console.log(`${label.padEnd(36)} ${stack.readyMs.toFixed(0).padStart(6)} ms`);
}

if (process.env.BENCH_COLD !== "0") {
  // Cold: no artifacts or compile cache, so the stack compiles the token first (offline solc WASM).
  await rm(`${ROOT}artifacts`, { recursive: true, force: true });
  await rm(`${ROOT}cache`, { recursive: true, force: true });
  await once("cold (compile + both chains + facilitator)");
}
for (let i = 1; i <= 3; i++) await once(`warm #${i}`);
