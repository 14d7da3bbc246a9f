import { expect } from "chai";
import { Writable } from "node:stream";
import { givenUrls, lineLogger, redactGivenUrls, stderrSink } from "../../src/harness/log.js";

describe("stack logging (src/harness/log.ts)", function () {
  it("writes one line per entry at or above the level, bigint-safe, with child bindings", () => {
    const lines: string[] = [];
    const logger = lineLogger("info", { name: "facilitator", write: (line) => lines.push(line) });
    logger.debug({ hidden: true }, "not shown");
    logger.info({ amount: 10n }, "settle");
    logger.child({ requestId: "r1" }).warn({}, "slow");
    expect(lines).to.deep.equal(['[facilitator] info: settle {"amount":"10"}\n', '[facilitator] warn: slow {"requestId":"r1"}\n']);
  });

  it("drops lines past the queue limit while nobody reads, and says how many once it drains", async () => {
    const written: string[] = [];
    let release: (() => void) | undefined;
    // A stream whose first write never completes until released: a reader that stopped reading.
    const stuck = new Writable({
      highWaterMark: 16,
      write(chunk: Buffer, _encoding, callback) {
        written.push(chunk.toString());
        if (written.length === 1) release = callback;
        else callback();
      },
    });
    const sink = stderrSink(100, stuck);
    for (let i = 0; i < 20; i++) sink.write(`line ${i} ${"x".repeat(20)}\n`);
    expect(stuck.writableLength).to.be.lessThan(200);
    release!();
    await sink.flush(1_000);
    sink.write("after\n");
    await sink.flush(1_000);
    expect(written.join("")).to.match(/\[log\] \d+ line\(s\) dropped: stderr was not being read\nafter\n$/);
  });

  it("stops writing a log file nobody rotates at its byte cap, says so once, and keeps accepting lines", () => {
    const written: string[] = [];
    const file = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        written.push(chunk.toString());
        callback();
      },
    });
    const sink = stderrSink(1024 * 1024, file, 100);
    for (let i = 0; i < 1_000; i++) sink.write(`line ${i.toString().padStart(3, "0")} ${"x".repeat(10)}\n`);
    // 19-byte lines: five fit in 100 bytes, the sixth passes the cap.
    expect(written).to.deep.equal([...[0, 1, 2, 3, 4].map((i) => `line 00${i} ${"x".repeat(10)}\n`), "[log] 100 bytes written: later lines are dropped (the stack keeps running)\n"]);
  });

  it("cuts the URLs a user handed in (flags, variables) to scheme and host, and leaves a library's documentation links whole", () => {
    const secrets = givenUrls(["--fork-testnet", "https://rpc.example/v2/KEY", "--port=0"], { FORK_MAINNET_URL: "https://u:p@main.example/?apikey=K", GITHUB_SERVER_URL: "https://github.com", HOME: "/root" });
    expect(secrets).to.deep.equal(["https://u:p@main.example/?apikey=K", "https://rpc.example/v2/KEY"]);
    const text = "cannot fork https://rpc.example/v2/KEY (nor https://u:p@main.example/?apikey=K): npm has a bug related to optional dependencies (https://github.com/npm/cli/issues/4828)";
    expect(redactGivenUrls(text, secrets)).to.equal(
      "cannot fork https://rpc.example (nor https://main.example): npm has a bug related to optional dependencies (https://github.com/npm/cli/issues/4828)",
    );
  });
});
