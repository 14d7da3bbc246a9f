// `npm start`: the local stack, through the same CLI the package installs (`cronos-x402 start`).
import { runCli } from "../src/cli/main.js";

await runCli(["start", ...process.argv.slice(2)]);
