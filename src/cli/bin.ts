#!/usr/bin/env node
// The `cronos-x402` executable (package.json "bin"): see ./main.ts.
import { runCliProcess } from "./main.js";

await runCliProcess(process.argv.slice(2));
