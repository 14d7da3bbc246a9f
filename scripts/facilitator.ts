// `npm run facilitator`: the facilitator alone, against the RPCs named in the environment
// (CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL, RELAYER_PRIVATE_KEY, …; see .env.example).
// With no RPC configured it runs on the embedded local chains instead (the local stack).
import { runFacilitatorProcess } from "../src/facilitator/main.js";

const hasRpc = Boolean(process.env.CRONOS_TESTNET_RPC_URL?.trim() || process.env.CRONOS_MAINNET_RPC_URL?.trim());
if (hasRpc) {
  await runFacilitatorProcess();
} else {
  process.stderr.write("facilitator: no CRONOS_*_RPC_URL configured; starting the embedded local chains (npm start)\n");
  await import("./start.js");
}
