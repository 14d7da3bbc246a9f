// `npm start`: the local stack, through the same CLI the package installs (`cronos-x402 start`).
import { runCliProcess } from "../src/cli/main.js";

await runCliProcess(["start", ...process.argv.slice(2)]);
