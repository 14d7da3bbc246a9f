import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { expect } from "chai";
import { ConfigError, loadConfig } from "../../src/facilitator/config/index.js";
import { HARDHAT_KEYS, makePayment, recordingLogger, startFacilitatorOnChain } from "../helpers/facilitator.js";
import { listen, type Listening } from "../helpers/http.js";

/**
 * A reverse proxy on 127.0.0.1 in front of `target`, connecting from 127.0.0.1 and appending the
 * client's address to X-Forwarded-For, as nginx's `$proxy_add_x_forwarded_for` does.
 */
function reverseProxy(target: string): Promise<Listening> {
  const upstream = new URL(target);
  return listen((req, res) => {
    const forwarded = [req.headers["x-forwarded-for"], req.socket.remoteAddress].filter(Boolean).join(", ");
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, localAddress: "127.0.0.1", agent: false, headers: { ...req.headers, "x-forwarded-for": forwarded } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(out);
  });
}

/** POSTs `body` as JSON from the loopback address `from` (the whole 127.0.0.0/8 is this machine). */
function postFrom(from: string, url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: IncomingHttpHeaders }> {
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: "POST", localAddress: from, agent: false, headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers } }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.on("error", reject);
    req.end(text);
  });
}

describe("TRUST_PROXY: a forged X-Forwarded-For buys no quota under any accepted form", () => {
  // Clients at 127.0.0.2 and 127.0.0.3 reach the facilitator through a proxy at 127.0.0.1; the
  // proxy's own address is what each form trusts (loopback would trust the clients as proxies too).
  for (const form of ["1", "127.0.0.1", "127.0.0.0/31", "10.0.0.0/8, 127.0.0.1"]) {
    it(`counts the client the proxy saw, not the forged header, with TRUST_PROXY=${form}`, async () => {
      const { chain, running } = await startFacilitatorOnChain({ TRUST_PROXY: form, RATE_LIMIT_VERIFY_PER_MINUTE: "3" });
      const proxy = await reverseProxy(running.url);
      try {
        const { body } = await makePayment(chain);
        const statuses: number[] = [];
        for (let i = 0; i < 6; i++) {
          statuses.push((await postFrom("127.0.0.2", `${proxy.url}/v2/x402/verify`, body, { "X-Forwarded-For": `198.51.100.${i}` })).status);
        }
        expect(statuses).to.deep.equal([200, 200, 200, 429, 429, 429]);
        // Another client behind the same proxy has its own quota.
        expect((await postFrom("127.0.0.3", `${proxy.url}/v2/x402/verify`, body, { "X-Forwarded-For": "198.51.100.0" })).status).to.equal(200);
      } finally {
        await proxy.close();
        await running.close(0);
      }
    });
  }

  it("counts every client behind an unnamed proxy as the proxy (TRUST_PROXY unset), and reports the stray header to the log, not the console", async () => {
    const log = recordingLogger();
    const { chain, running } = await startFacilitatorOnChain({ RATE_LIMIT_VERIFY_PER_MINUTE: "2" }, { logger: log.logger });
    const proxy = await reverseProxy(running.url);
    const printed: unknown[] = [];
    const { warn, error } = console;
    console.warn = (...args: unknown[]) => printed.push(args);
    console.error = (...args: unknown[]) => printed.push(args);
    try {
      const { body } = await makePayment(chain);
      const statuses = [];
      for (const from of ["127.0.0.2", "127.0.0.3", "127.0.0.4"]) statuses.push((await postFrom(from, `${proxy.url}/v2/x402/verify`, body)).status);
      expect(statuses).to.deep.equal([200, 200, 429]);
      expect(printed).to.deep.equal([]);
      const reports = log.lines.filter((line) => line.fields.code === "ERR_ERL_UNEXPECTED_X_FORWARDED_FOR");
      expect(reports.map((line) => [line.level, line.fields.limiter])).to.deep.equal([["error", "verify"]]);
      expect(reports[0]!.message).to.match(/^express-rate-limit: The 'X-Forwarded-For' header is set but the Express 'trust proxy' setting is false/);
    } finally {
      console.warn = warn;
      console.error = error;
      await proxy.close();
      await running.close(0);
    }
  });

  it("refuses TRUST_PROXY=true (and its spellings) at start-up, and any entry that is no address, subnet or proxy name", () => {
    const load = (value: string) => () => loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, TRUST_PROXY: value }, { embedded: ["cronos-testnet"] });
    for (const value of ["true", "TRUE", "yes", "*"]) {
      expect(load(value)).to.throw(
        ConfigError,
        `TRUST_PROXY: "${value}" would trust every X-Forwarded-For entry, so any client could pick its rate-limit key; give the number of proxies in front (e.g. 1) or their addresses/subnets (e.g. loopback or 10.0.0.0/8)`,
      );
    }
    expect(load("10.0.0.0/33")).to.throw(ConfigError, 'TRUST_PROXY: "10.0.0.0/33" is not an IP address, a subnet (address/prefix) or one of loopback, linklocal, uniquelocal');
    expect(load("proxy.internal")).to.throw(ConfigError, 'TRUST_PROXY: "proxy.internal" is not an IP address');
    expect(loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, TRUST_PROXY: "loopback, fd00::/8, 10.0.0.0/255.0.0.0" }, { embedded: ["cronos-testnet"] }).trustProxy).to.deep.equal([
      "loopback",
      "fd00::/8",
      "10.0.0.0/255.0.0.0",
    ]);
  });
});
