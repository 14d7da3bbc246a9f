import { expect } from "chai";
import { Writable } from "node:stream";
import { lineLogger, stderrSink } from "../../src/harness/log.js";

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
});
