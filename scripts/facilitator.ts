// `npm run facilitator`: the facilitator alone, against the RPCs named in the environment
// (CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL, RELAYER_PRIVATE_KEY, …; see .env.example).
// It never starts local chains: without an RPC URL it stops with one line naming the variable.
// The same CLI the package installs (`cronos-x402 facilitator`).
import { runCli } from "../src/cli/main.js";

await runCli(["facilitator", ...process.argv.slice(2)]);
