import { expect } from "chai";
import { spawnSync } from "node:child_process";

describe("ledger: embedded SQLite on Node 22", () => {
  it("silences Node's ExperimentalWarning for SQLite and no other warning", () => {
    const script = [
      'const { openSqliteLedger } = await import("./src/ledger/sqlite.ts");',
      'const ledger = openSqliteLedger({ location: ":memory:" });',
      "await ledger.close();",
      'process.emitWarning("another experiment", "ExperimentalWarning");',
    ].join("\n");
    const run = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8" });
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stderr).to.not.match(/SQLite/);
    expect(run.stderr).to.match(/ExperimentalWarning: another experiment/);
  });
});
