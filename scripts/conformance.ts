// `npm run conformance`: checks a facilitator (or the local stack, started for the run) against the spec.
// Check lines and the summary go to stdout (stderr with --json, whose document alone is on stdout).
import { runConformanceCommand } from "../src/conformance/cli.js";

const status = await runConformanceCommand(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
});
// Let the streams drain before leaving: stdout may be a pipe read by CI.
process.stdout.write("", () => process.exit(status));
