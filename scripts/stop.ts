// `npm stop`: stops the stack `npm start -- --background` started from the clone, through the same CLI the
// package installs (`cronos-x402 stop`).
import { runCliProcess } from "../src/cli/main.js";

await runCliProcess(["stop", ...process.argv.slice(2)]);
