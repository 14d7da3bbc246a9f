import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import { ROOT, spawnInRoot } from "../helpers/processes.js";

// examples/python-ci as CI runs it: its run.sh starts the stack in the background, loads .x402.env into the
// environment, runs the Python unittest suite (a standard-library seller, paid through `cronos-x402 pay` / `sign`
// and POST /harness/sign, each failure made over HTTP), and stops the stack. The suite knows nothing of
// JavaScript: X402_CLI tells it how to run the kit's command (here from the sources).

/** The suite's tests, each with what it meets. */
const TESTS = [
  "test_a_payment_goes_through",
  "test_a_payment_signed_over_http_by_the_stack",
  "test_the_balance_gone_between_verify_and_settle",
  "test_the_facilitator_busy",
  "test_the_facilitator_down",
  "test_the_rpc_down",
  "test_zz_an_authorization_expired",
];

describe("examples/python-ci: a Python seller and its unittest suite on the local stack (run.sh, as CI runs it)", function () {
  this.timeout(900_000);
  let dir: string;

  before(() => {
    const python = spawnSync("python3", ["--version"], { encoding: "utf8" });
    // CI installs it (.ci/run); a machine without it fails here, saying so, rather than skipping.
    expect(python.status, "python3 is needed to run examples/python-ci (Debian: apt-get install python3)").to.equal(0);
    dir = mkdtempSync(join(tmpdir(), "x402-python-ci-"));
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("runs every test of the suite, each ok (a payment, the facilitator busy and down, the balance gone between verify and settle, the RPC down, an authorization expired), then stops the stack", async () => {
    const cli = `${join(ROOT, "node_modules", ".bin", "tsx")} ${join(ROOT, "src", "cli", "bin.ts")}`;
    const run = spawnInRoot("bash", ["-c", 'cd "$1" && exec bash "$2"', "run", dir, join(ROOT, "examples", "python-ci", "run.sh")], { X402_CLI: cli });
    const code = await run.exited;
    const said = `${run.stdout()}\n${run.stderr()}`;
    expect(code, said).to.equal(0);
    for (const test of TESTS) expect(run.stderr(), test).to.match(new RegExp(`^${test} \\(test_seller\\.PythonSellerOnTheLocalStack\\.${test}\\) \\.\\.\\. ok$`, "m"));
    expect(run.stderr()).to.match(new RegExp(`\\nRan ${TESTS.length} tests in [\\d.]+s\\n\\nOK\\n`));
    // The stack stopped: its state file gone (its log stays), the env file left for the job's artifacts.
    expect(run.stderr().trimEnd().split("\n").at(-1)).to.match(/^\[stop\] stopped /);
    expect(existsSync(join(dir, ".cronos-x402", "stack.json"))).to.equal(false);
    expect(readdirSync(join(ROOT, "examples", "python-ci")).sort()).to.deep.equal(["README.md", "run.sh", "seller.py", "test_seller.py"]);
  });
});
