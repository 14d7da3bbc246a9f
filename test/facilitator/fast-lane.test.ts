import { expect } from "chai";
import { once } from "node:events";
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import { makePayment, openFacilitator } from "../helpers/facilitator.js";
import { listen, readBody, type Listening } from "../helpers/http.js";
import { waitUntil } from "../helpers/wait.js";

/** One raw POST: exactly these headers and bytes; the status, headers and body text of the answer. */
function post(server: Listening, path: string, headers: Record<string, string>, body: Buffer | string) {
  return new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port: server.port, path, method: "POST", headers }, (res) => {
      void readBody(res).then((text) => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }), reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

const json = (body: Buffer | string, type = "application/json") => ({ "Content-Type": type, "Content-Length": String(Buffer.byteLength(body)) });
/** The answer's headers that must be the same whichever way the request went (the date and connection headers aside). */
const answerHeaders = (headers: IncomingHttpHeaders) => ({ type: headers["content-type"], length: headers["content-length"], requestId: headers["x-request-id"] });

describe("verify and settle on the fast lane (unguarded routes, plain JSON bodies): the same answers as the general path", function () {
  let opened: Awaited<ReturnType<typeof openFacilitator>>;
  let server: Listening;
  const outcomes: Array<{ route: string; status: number; code: string }> = [];

  before(async () => {
    opened = await openFacilitator("cronos-testnet", { BODY_LIMIT_BYTES: "4096" }, { onOutcome: (record) => outcomes.push(record) });
    server = await listen(opened.app);
  });
  after(async () => {
    await server.close();
    await opened.facilitator.close();
  });

  it("answers byte for byte as the general path for valid, refused, unreadable and odd bodies, on verify and settle", async () => {
    const payment = await makePayment(opened.chain);
    const badSignature = await makePayment(opened.chain, { signature: `0x${"11".repeat(65)}` });
    const bodies: Array<Buffer | string> = [
      JSON.stringify(payment.body),
      `\ufeff${JSON.stringify(payment.body)}`,
      JSON.stringify(badSignature.body),
      JSON.stringify({ ...payment.body, x402Version: 2 }),
      JSON.stringify({ x402Version: 2, paymentPayload: {}, paymentRequirements: {} }),
      "{",
      "{} trailing",
      "\ufeff",
      "   ",
      "{}",
      "[]",
      "null",
      '"a string"',
      "5",
      JSON.stringify({ x402Version: 1, paymentHeader: "ü€😀", paymentRequirements: { network: "cronos-testnet\u0000" } }),
      Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), // invalid UTF-8 inside a key
    ];
    for (const route of ["verify", "settle"]) {
      for (const [index, body] of bodies.entries()) {
        // Only the first body may settle: the same payment on both lanes would settle once and then be refused.
        if (route === "settle" && index < 2) continue;
        // `application/json;charset=utf-8` (no space) is left to the general path; `application/json` takes the lane.
        const lane = await post(server, `/v2/x402/${route}`, { ...json(body), "X-Request-Id": `lane-${index}` }, body);
        const general = await post(server, `/v2/x402/${route}`, { ...json(body, "application/json;charset=utf-8"), "X-Request-Id": `lane-${index}` }, body);
        expect(lane.status, `${route} body ${index}`).to.equal(general.status);
        // A settle refusal carries the time of its answer.
        const untimed = (text: string) => text.replace(/"timestamp":"[^"]+"/, '"timestamp":"…"');
        expect(untimed(lane.text), `${route} body ${index}`).to.equal(untimed(general.text));
        expect(answerHeaders(lane.headers), `${route} body ${index}`).to.deep.equal(answerHeaders(general.headers));
        expect(lane.headers["x-request-id"]).to.equal(`lane-${index}`);
      }
    }
    // The first body: valid on verify; the byte-order mark is dropped as the JSON middleware drops it.
    const valid = await post(server, "/v2/x402/verify", json(JSON.stringify(payment.body)), JSON.stringify(payment.body));
    expect(JSON.parse(valid.text)).to.deep.equal({ isValid: true, invalidReason: null });
    expect((await post(server, "/v2/x402/verify", json("{"), "{")).text).to.equal(
      JSON.stringify({ isValid: false, invalidReason: "Invalid request: body is not valid JSON" }),
    );
  });

  it("settles on the lane: the payment is paid once, and its replay refused as on the general path", async () => {
    const payment = await makePayment(opened.chain);
    const body = JSON.stringify(payment.body);
    const settled = await post(server, "/v2/x402/settle", json(body), body);
    expect(settled.status).to.equal(200);
    expect(JSON.parse(settled.text)).to.include({ event: "payment.settled", from: payment.payer.address, to: payment.payTo, value: "1000000" });
    const again = await post(server, "/v2/x402/settle", json(body), body);
    const generalAgain = await post(server, "/v2/x402/settle", json(body, "application/json;charset=utf-8"), body);
    expect(JSON.parse(again.text)).to.include({ event: "payment.failed" });
    expect({ ...JSON.parse(again.text), timestamp: 0 }).to.deep.equal({ ...JSON.parse(generalAgain.text), timestamp: 0 });
  });

  it("leaves to the general path what it does not take: compressed, chunked, over the limit, other types and charsets, other spellings of the path", async () => {
    const payment = await makePayment(opened.chain);
    const body = JSON.stringify(payment.body);
    const valid = JSON.stringify({ isValid: true, invalidReason: null });
    // Compressed: the JSON middleware inflates it.
    const gzipped = gzipSync(body);
    expect((await post(server, "/v2/x402/verify", { ...json(gzipped), "Content-Encoding": "gzip" }, gzipped)).text).to.equal(valid);
    // Chunked (no Content-Length).
    const chunked = await post(server, "/v2/x402/verify", { "Content-Type": "application/json", "Transfer-Encoding": "chunked" }, body);
    expect(chunked.text).to.equal(valid);
    // Over BODY_LIMIT_BYTES: 413 before the body is read.
    const big = JSON.stringify({ ...payment.body, padding: "x".repeat(5_000) });
    const tooBig = await post(server, "/v2/x402/verify", json(big), big);
    expect(tooBig.status).to.equal(413);
    expect(JSON.parse(tooBig.text)).to.deep.equal({ error: "Payload too large: the limit is 4096 bytes" });
    // Another type, another charset.
    expect((await post(server, "/v2/x402/verify", json(body, "text/plain"), body)).status).to.equal(415);
    expect((await post(server, "/v2/x402/verify", json(body, "application/json; charset=latin1"), body)).status).to.equal(415);
    // A query string, a trailing slash, upper case: Express's routing answers them as always.
    for (const path of ["/v2/x402/verify?x=1", "/v2/x402/verify/", "/V2/X402/VERIFY"]) {
      expect((await post(server, path, json(body), body)).text, path).to.equal(valid);
    }
    // A Content-Length of 0: the general path (an empty body is read as {}).
    expect((await post(server, "/v2/x402/verify", { "Content-Type": "application/json", "Content-Length": "0" }, "")).status).to.equal(400);
  });

  it("answers nothing to a client that goes away mid-body, records no outcome for it, and serves the next request", async () => {
    const before = outcomes.length;
    // The server's side of each connection: the bytes it read, and whether it saw the close.
    const seen: Array<{ bytes: number; closed: boolean }> = [];
    const onConnection = (side: import("node:net").Socket) => {
      const one = { bytes: 0, closed: false };
      seen.push(one);
      side.on("data", (chunk: Buffer) => (one.bytes += chunk.length));
      side.on("close", () => (one.closed = true));
    };
    server.server.on("connection", onConnection);
    try {
      const socket = connect(server.port, "127.0.0.1");
      let answered = "";
      socket.on("data", (chunk: Buffer) => (answered += chunk.toString()));
      await once(socket, "connect");
      const partial = "POST /v2/x402/verify HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"x402Version\":1";
      socket.write(partial);
      await waitUntil("the server read the partial request", () => seen[0]?.bytes === partial.length);
      // A later request on another connection is answered; the partial one still has no answer, no outcome.
      const payment = await makePayment(opened.chain);
      const body = JSON.stringify(payment.body);
      expect((await post(server, "/v2/x402/verify", json(body), body)).status).to.equal(200);
      expect(outcomes.length).to.equal(before + 1);
      expect(answered).to.equal("");
      socket.destroy();
      await waitUntil("the server saw the client go", () => seen[0]!.closed);
      expect(answered).to.equal("");
      expect(outcomes.length).to.equal(before + 1);
      expect((await post(server, "/v2/x402/verify", json(body), body)).status).to.equal(200);
      expect(outcomes.length).to.equal(before + 2);
    } finally {
      server.server.off("connection", onConnection);
    }
  });

  it("is not taken when a guard stands before the route: with a verify limit, the limiter counts every request (429 past it)", async () => {
    const limited = await openFacilitator("cronos-testnet", { RATE_LIMIT_VERIFY_PER_MINUTE: "2" });
    const limitedServer = await listen(limited.app);
    try {
      const payment = await makePayment(limited.chain);
      const body = JSON.stringify(payment.body);
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await post(limitedServer, "/v2/x402/verify", json(body), body)).status);
      expect(statuses).to.deep.equal([200, 200, 429]);
    } finally {
      await limitedServer.close();
      await limited.facilitator.close();
    }
  });
});
