import { expect } from "chai";
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { poisonSignature } from "../helpers/faulty-recovery-worker.js";
import { makePayment, openFacilitator } from "../helpers/facilitator.js";
import { listen, type Listening } from "../helpers/http.js";
import { waitUntil } from "../helpers/wait.js";

/** A TCP connection to the facilitator, once connected. */
async function connected(port: number): Promise<Socket> {
  const socket = connect(port, "127.0.0.1");
  await once(socket, "connect");
  return socket;
}

const FAULTY = new URL("../helpers/faulty-recovery-worker.ts", import.meta.url);

/** One series' value on the facilitator's registry (0 when absent). */
async function metric(opened: Awaited<ReturnType<typeof openFacilitator>>, name: string, labels: string): Promise<number> {
  const text = await opened.facilitator.metrics.registry.getSingleMetricAsString(name);
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels} `));
  return line ? Number(line.split(" ")[1]) : 0;
}

describe("verify with signature recovery on worker threads: a worker that dies mid-batch (chain/recovery-pool.ts)", function () {
  let opened: Awaited<ReturnType<typeof openFacilitator>>;
  let server: Listening;
  const outcomes: Array<{ requestId: string; code: string }> = [];

  before(async () => {
    // One worker that exits on a batch holding the poison signature (test/helpers/faulty-recovery-worker.ts). Its
    // late bound its hang bound (RECOVERY_LATE_MS=1000): on a loaded machine the late path (10 ms by default)
    // could answer the batch before the exit.
    opened = await openFacilitator("cronos-testnet", { RECOVERY_WORKERS: "1", RECOVERY_LATE_MS: "1000" }, { recoveryPool: { script: FAULTY, inlineWhenIdle: false }, onOutcome: (record) => outcomes.push(record) });
    server = await listen(opened.app);
  });
  after(async () => {
    await server.close();
    await opened.facilitator.close();
  });

  /** `valid` fresh payments and a poison one at once, each on a connection of its own; every answer, by request id. */
  async function round(valid: number, poison: boolean) {
    const bodies = await Promise.all(Array.from({ length: valid }, () => makePayment(opened.chain)));
    const requests = [...bodies.map((p) => ({ body: p.body, poison: false })), ...(poison ? [{ body: (await makePayment(opened.chain, { signature: poisonSignature("ee") })).body, poison: true }] : [])];
    // Connected first, then every request written in one go: they reach the facilitator in one turn of its loop.
    const sockets = await Promise.all(requests.map(() => connected(server.port)));
    const texts = sockets.map(
      (socket) =>
        new Promise<string>((resolve, reject) => {
          let text = "";
          socket.setEncoding("utf8");
          socket.on("data", (chunk: string) => (text += chunk));
          socket.on("end", () => resolve(text));
          socket.on("error", reject);
        }),
    );
    requests.forEach(({ body }, i) => {
      const json = JSON.stringify(body);
      const id = `pool-${outcomes.length}-${i}`;
      sockets[i]!.write(`POST /v2/x402/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n${json}`);
    });
    const answers = (await Promise.all(texts)).map((text) => {
      const [head, ...rest] = text.split("\r\n\r\n");
      return {
        status: Number(head!.split(" ")[1]),
        id: /x-request-id: (\S+)/i.exec(head!)?.[1],
        body: JSON.parse(rest.join("\r\n\r\n")) as { isValid: boolean; invalidReason: string | null },
      };
    });
    requests.forEach(({ poison }, i) => {
      expect(answers[i]!.status).to.equal(200);
      expect(answers[i]!.body).to.deep.equal(poison ? { isValid: false, invalidReason: VerifyReason.invalidSignature } : { isValid: true, invalidReason: null });
    });
    return answers;
  }

  /** The shared wait for `done`, with `step` (a round of requests) run after each check that found it not yet so. */
  const roundsUntil = (done: () => Promise<boolean>, what: string, step: () => Promise<unknown>) => waitUntil(what, async () => (await done()) || (await step(), false));

  it("answers every request once, right, while its worker exits; a new worker is started and takes batches again", async () => {
    // Until the worker is ready (it starts at the first recovery), rounds are answered inline.
    await roundsUntil(async () => (await metric(opened, "x402_recovery_pool", '{what="ready"}')) >= 1, "a recovery worker ready", () => round(8, false));
    // The poison's batch reaches the worker (every recovery goes to it once it is ready), which exits: one round.
    const before = outcomes.length;
    const answers = await round(24, true);
    // Each request answered once: one outcome record per request, under its own id.
    const records = outcomes.slice(before);
    expect(records.length).to.equal(answers.length);
    expect(new Set(records.map((r) => r.requestId)).size).to.equal(answers.length);
    expect(records.map((r) => r.requestId).sort()).to.deep.equal(answers.map((a) => a.id).sort());
    await waitUntil("the worker's exit on the poison", async () => (await metric(opened, "x402_recovery_workers_lost_total", '{reason="exited"}')) >= 1);
    expect(await metric(opened, "x402_signature_recoveries_total", '{path="rescued"}')).to.be.greaterThan(0);
    // The worker is replaced (a thread started again: seconds on a loaded machine); recoveries go to it again.
    await roundsUntil(async () => (await metric(opened, "x402_recovery_pool", '{what="ready"}')) >= 1, "the worker replaced", () => round(8, false));
    const worked = await metric(opened, "x402_signature_recoveries_total", '{path="worker"}');
    await roundsUntil(async () => (await metric(opened, "x402_signature_recoveries_total", '{path="worker"}')) > worked, "a batch reaching the new worker", () => round(16, false));
    expect(await metric(opened, "x402_recovery_workers_lost_total", '{reason="exited"}')).to.equal(1);
  });
});
