import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { ROOT } from "../helpers/processes.js";

// whenWrapperShellSignalled (src/harness/parent.ts): a command run as `sh -c '<command>'` (as npx runs
// every command) learns of the SIGINT its shell keeps. Here the command is a small script that reports
// what it noticed; the shell is the machine's sh (dash on Debian, which catches SIGINT while it waits).

const WATCHER = `
import { whenWrapperShellSignalled } from ${JSON.stringify(join(ROOT, "src", "harness", "parent.ts"))};
whenWrapperShellSignalled((shell) => { console.log("signalled " + shell); process.exit(0); }, 100);
console.log("watching " + process.pid);
setInterval(() => {}, 1000);
`;

/** `sh -c` running the watcher script (on the kit's Node, through tsx); resolves once it watches. */
async function shellRunningWatcher(): Promise<{ shell: ChildProcess; watcher: number; output: () => string; closed: Promise<void> }> {
  // Two commands in the string: no shell replaces itself with the last one (bash would for a lone command).
  const shell = spawn("sh", ["-c", '"$0" --import tsx --input-type=module -e "$1"; true', process.execPath, WATCHER], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  shell.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  shell.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const closed = new Promise<void>((resolve) => shell.once("close", () => resolve()));
  for (let waited = 0; !/watching (\d+)/.test(out); waited += 50) {
    if (waited > 60_000 || shell.exitCode !== null) throw new Error(`the watcher did not start:\n${out}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { shell, watcher: Number(/watching (\d+)/.exec(out)![1]), output: () => out, closed };
}

/** Whether the shell catches SIGINT (dash and bash do while they wait): otherwise the case does not arise. */
function catchesSigint(pid: number): boolean {
  const caught = /^SigCgt:\s+([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? "0";
  return (BigInt(`0x${caught}`) & 2n) !== 0n;
}

describe("whenWrapperShellSignalled: the SIGINT a wrapping sh -c keeps (src/harness/parent.ts)", function () {
  this.timeout(90_000);
  before(function () {
    if (process.platform !== "linux") this.skip();
  });

  it("SIGINT to the shell alone reaches the command it waits for, which the shell itself never passes on", async function () {
    const { shell, output, closed } = await shellRunningWatcher();
    try {
      if (!catchesSigint(shell.pid!)) this.skip();
      shell.kill("SIGINT");
      await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 10_000))]);
      expect(output()).to.match(new RegExp(`^signalled ${shell.pid}$`, "m"));
    } finally {
      shell.kill("SIGKILL");
    }
  });

  it("the command stopped and continued (Ctrl+Z, fg; a debugger) is no signal: it keeps running", async function () {
    const { shell, watcher, output } = await shellRunningWatcher();
    try {
      if (!catchesSigint(shell.pid!)) this.skip();
      for (let i = 0; i < 3; i++) {
        process.kill(watcher, "SIGSTOP");
        await new Promise((resolve) => setTimeout(resolve, 300));
        process.kill(watcher, "SIGCONT");
        await new Promise((resolve) => setTimeout(resolve, 700));
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(output()).to.not.include("signalled");
      expect(shell.exitCode).to.equal(null);
      // And a SIGINT afterwards is still seen.
      shell.kill("SIGINT");
      for (let waited = 0; !output().includes("signalled") && waited < 10_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(output()).to.match(new RegExp(`^signalled ${shell.pid}$`, "m"));
    } finally {
      // The watcher exits by itself once it has seen the signal.
      try {
        process.kill(watcher, "SIGKILL");
      } catch {
        // gone
      }
      shell.kill("SIGKILL");
    }
  });
});
