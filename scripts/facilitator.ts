// `npm run facilitator`: the facilitator alone, against the RPCs named in the environment
// (CRONOS_TESTNET_RPC_URL / CRONOS_MAINNET_RPC_URL, RELAYER_PRIVATE_KEY, …; see .env.example).
// It never starts local chains: without an RPC URL it stops with one line naming the variable.
// The same CLI the package installs (`cronos-x402 facilitator`), run here from the TypeScript sources
// (tsx, as every npm script of the clone) rather than from dist/: the clone is where the kit is developed,
// so an edit is live without a build, and `npm run instances` and the tests' clusters run the code under
// test. Production runs the package's compiled CLI (docs/operations.md); a clone deployed as is runs
// `npm run build`, then `node dist/cli/bin.js facilitator`.
import { runCliProcess } from "../src/cli/main.js";

await runCliProcess(["facilitator", ...process.argv.slice(2)]);
