import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { ROOT } from "../helpers/processes.js";
import { skipBecause } from "../helpers/skip.js";
import { waitUntil } from "../helpers/wait.js";

// whenWrapperShellSignalled (src/harness/parent.ts): a command run as `sh -c '<command>'` (as npx runs
// every command) learns of the SIGINT its shell keeps. Here the command is a small script that reports
// what it noticed; the shell is the machine's sh (dash on Debian, which catches SIGINT while it waits).

const WATCHER = `
import { whenWrapperShellSignalled } from ${JSON.stringify(join(ROOT, "src", "harness", "parent.ts"))};
whenWrapperShellSignalled((shell) => { console.log("signalled " + shell); process.exit(0); }, 100);
console.log("watching " + process.pid);
// A tick each 100 ms: proof, to the test, that it runs (and so does its watch, polled as often).
setInterval(() => console.log("tick"), 100);
`;

/** `sh -c` running the watcher script (on the kit's Node, through tsx); resolves once it watches. */
async function shellRunningWatcher(): Promise<{ shell: ChildProcess; watcher: number; output: () => string; closed: Promise<void> }> {
  // Two commands in the string: no shell replaces itself with the last one (bash would for a lone command).
  const shell = spawn("sh", ["-c", '"$0" --import tsx --input-type=module -e "$1"; true', process.execPath, WATCHER], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  shell.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  shell.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const closed = new Promise<void>((resolve) => shell.once("close", () => resolve()));
  await waitUntil("the watcher to start", () => {
    if (shell.exitCode !== null) throw new Error(`the watcher exited before it watched:\n${out}`);
    return /watching (\d+)/.test(out);
  }, 60_000);
  return { shell, watcher: Number(/watching (\d+)/.exec(out)![1]), output: () => out, closed };
}

/** The ticks the watcher printed so far. */
const ticks = (output: string) => output.split("\n").filter((line) => line === "tick").length;

/** A process's state letter in /proc (`T`: stopped). */
const stateOf = (pid: number) => /^\d+ \(.*\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1];

/** Whether the shell catches SIGINT (dash and bash do while they wait): otherwise the case does not arise. */
function catchesSigint(pid: number): boolean {
  const caught = /^SigCgt:\s+([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? "0";
  return (BigInt(`0x${caught}`) & 2n) !== 0n;
}

describe("whenWrapperShellSignalled: the SIGINT a wrapping sh -c keeps (src/harness/parent.ts)", function () {
  this.timeout(90_000);
  before(function () {
    if (process.platform !== "linux") skipBecause(this, "reads /proc: Linux only", "condition");
  });

  it("SIGINT to the shell alone reaches the command it waits for, which the shell itself never passes on", async function () {
    const { shell, output, closed } = await shellRunningWatcher();
    try {
      if (!catchesSigint(shell.pid!)) skipBecause(this, "this machine's sh does not catch SIGINT while it waits: the case does not arise", "condition");
      shell.kill("SIGINT");
      await waitUntil("the watcher to report the signal", () => output().includes("signalled"));
      await closed;
      expect(output()).to.match(new RegExp(`^signalled ${shell.pid}$`, "m"));
    } finally {
      shell.kill("SIGKILL");
    }
  });

  it("the command stopped and continued (Ctrl+Z, fg; a debugger) is no signal: it keeps running", async function () {
    const { shell, watcher, output } = await shellRunningWatcher();
    try {
      if (!catchesSigint(shell.pid!)) skipBecause(this, "this machine's sh does not catch SIGINT while it waits: the case does not arise", "condition");
      for (let i = 0; i < 3; i++) {
        process.kill(watcher, "SIGSTOP");
        await waitUntil("the watcher stopped", () => stateOf(watcher) === "T");
        const before = ticks(output());
        process.kill(watcher, "SIGCONT");
        // Running again: three of its watch's polls have gone by once three more ticks are out.
        await waitUntil("three ticks after the continue", () => ticks(output()) >= before + 3);
      }
      const settled = ticks(output());
      await waitUntil("five more ticks", () => ticks(output()) >= settled + 5);
      expect(output()).to.not.include("signalled");
      expect(shell.exitCode).to.equal(null);
      // And a SIGINT afterwards is still seen.
      shell.kill("SIGINT");
      await waitUntil("the watcher to report the signal", () => output().includes("signalled"));
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
