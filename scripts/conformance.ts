// `npm run conformance`: checks a facilitator (or the local stack, started for the run) against the spec,
// through the same CLI the package installs (`cronos-x402 conformance`).
// Check lines and the summary go to stdout (stderr with --json, whose document alone is on stdout).
import { runCliProcess } from "../src/cli/main.js";

await runCliProcess(["conformance", ...process.argv.slice(2)]);
