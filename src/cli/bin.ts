#!/usr/bin/env node
// The `cronos-x402` executable (package.json "bin"): see ./main.ts.
import { runCli } from "./main.js";

await runCli(process.argv.slice(2));
