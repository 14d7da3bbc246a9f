import { expect } from "chai";
import hre from "hardhat";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { localAccount } from "../../src/harness/accounts.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { RequestError } from "../../src/protocol/reasons.js";
import { rawRequest } from "../helpers/http.js";
import { balanceOfData, rpc } from "../helpers/rpc.js";
import { startTestStack } from "../helpers/seller.js";

const EPHEMERAL = { port: 0, rpcPorts: { "cronos-testnet": 0, "cronos-mainnet": 0 } } as const;
const SELLER = localAccount(1).address;
const BUYER = localAccount(2);
const BUYER_2 = localAccount(3);

describe("local stack dashboard: buyers and the try-it panel (src/harness/playground.ts)", function () {
  let stack: LocalStack;
  let url: string;
  const balance = async (address: string) => {
    const network = stack.networks["cronos-testnet"]!;
    return BigInt(await rpc<string>(network.rpcUrl, "eth_call", [{ to: network.token, data: balanceOfData(address) }, "latest"]));
  };
  const pay = async (body: unknown) => {
    // What the page's own script sends: a browser puts the page's Origin on every POST.
    const response = await fetch(`${url}dashboard/api/local/pay`, { method: "POST", headers: { "Content-Type": "application/json", Origin: new URL(url).origin }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as any };
  };

  before(async () => {
    stack = await startTestStack({ hre, ...EPHEMERAL, networks: ["cronos-testnet"], buyers: 2, buyerBalance: 10_000_000n });
    url = stack.dashboardUrl!;
  });
  after(async () => {
    await stack?.stop();
  });

  it("is on by default: the page is at {facilitator}/ and the networks view is local, with the chain's RPC URL in full", async () => {
    expect(url).to.equal(`${stack.facilitatorUrl}/`);
    const page = await fetch(url);
    expect(page.status).to.equal(200);
    expect(page.headers.get("content-type")).to.equal("text/html; charset=utf-8");
    const view = (await (await fetch(`${url}dashboard/api/networks`)).json()) as any;
    expect(view.local).to.equal(true);
    expect(view.networks.map((n: any) => [n.network, n.rpc, n.ok])).to.deep.equal([["cronos-testnet", stack.networks["cronos-testnet"]!.rpcUrl, true]]);
  });

  it("lists the funded buyers with their live balances and their LOCAL-ONLY keys", async () => {
    const body = (await (await fetch(`${url}dashboard/api/local/buyers`)).json()) as any;
    expect(body).to.deep.equal({
      buyers: [
        { network: "cronos-testnet", address: BUYER.address, privateKey: BUYER.privateKey, balance: "10000000" },
        { network: "cronos-testnet", address: BUYER_2.address, privateKey: BUYER_2.privateKey, balance: "10000000" },
      ],
    });
  });

  it("pays through verify then settle: the USDC.e moves on chain and the feed holds both rows", async () => {
    const before = { buyer: await balance(BUYER_2.address), seller: await balance(SELLER) };
    const { status, body } = await pay({ network: "cronos-testnet", buyer: BUYER_2.address, amount: "0.25", scenario: "pay" });
    expect(status).to.equal(200);
    expect(body.steps.map((step: any) => step.route)).to.deep.equal(["verify", "settle"]);
    expect(body.steps[0].answer).to.deep.equal({ isValid: true, invalidReason: null });
    const settled = body.steps[1].answer;
    expect(settled).to.deep.include({ event: "payment.settled", from: BUYER_2.address, to: SELLER, value: "250000", network: "cronos-testnet" });
    expect(await balance(BUYER_2.address)).to.equal(before.buyer - 250_000n);
    expect(await balance(SELLER)).to.equal(before.seller + 250_000n);
    const buyers = (await (await fetch(`${url}dashboard/api/local/buyers`)).json()) as any;
    expect(buyers.buyers[1].balance).to.equal((before.buyer - 250_000n).toString());

    const feed = stack.facilitator.facilitator.dashboard!.feed;
    const rows = (await feed.rows()).filter((row) => row.payer === BUYER_2.address);
    expect(rows.map((row) => [row.route, row.outcome, row.amount, row.txHash ?? null])).to.deep.equal([
      ["verify", "valid", "0.25", null],
      ["settle", "settled", "0.25", settled.txHash],
    ]);
  });

  it("provokes each refusal with its exact reason, and no USDC.e moves", async () => {
    const before = await balance(BUYER.address);
    const expired = await pay({ network: "cronos-testnet", buyer: BUYER.address, amount: "0.1", scenario: "expired" });
    expect(expired.body.steps).to.deep.equal([{ route: "verify", answer: { isValid: false, invalidReason: VerifyReason.expired } }]);
    const wrong = await pay({ network: "cronos-testnet", buyer: BUYER.address, amount: "0.1", scenario: "wrongAmount" });
    expect(wrong.body.steps).to.deep.equal([{ route: "verify", answer: { isValid: false, invalidReason: VerifyReason.invalidAmount("100000") } }]);
    expect(await balance(BUYER.address)).to.equal(before);

    // Replay with nothing paid yet: pays once, then sends the same authorization again.
    const replay = await pay({ network: "cronos-testnet", buyer: BUYER.address, amount: "0.1", scenario: "replay" });
    expect(replay.body.steps.map((step: any) => [step.route, step.answer.isValid ?? step.answer.event])).to.deep.equal([
      ["verify", true],
      ["settle", "payment.settled"],
      ["verify", false],
    ]);
    expect(replay.body.steps[2].answer).to.deep.equal({ isValid: false, invalidReason: VerifyReason.alreadyUsed });
    const again = await pay({ network: "cronos-testnet", buyer: BUYER.address, amount: "0.1", scenario: "replay" });
    expect(again.body.steps).to.deep.equal([{ route: "verify", answer: { isValid: false, invalidReason: VerifyReason.alreadyUsed } }]);
    expect(await balance(BUYER.address)).to.equal(before - 100_000n);
  });

  it("refuses bad input with 400 naming the field, and pays nothing", async () => {
    const before = await balance(BUYER.address);
    const good = { network: "cronos-testnet", buyer: BUYER.address, amount: "0.1", scenario: "pay" };
    const cases: Array<[unknown, string]> = [
      [{ ...good, amount: "abc" }, "Invalid request: amount must be USDC.e as a decimal with up to 6 decimals, e.g. 0.25"],
      [{ ...good, amount: "0.1234567" }, "Invalid request: amount must be USDC.e as a decimal with up to 6 decimals, e.g. 0.25"],
      [{ ...good, amount: "0" }, "Invalid request: amount must be more than 0"],
      [{ ...good, scenario: "steal" }, "Invalid request: scenario must be one of pay, expired, wrongAmount, replay"],
      [{ ...good, buyer: "0x1234" }, "Invalid request: buyer must be a 0x-prefixed 20-byte address"],
      [{ ...good, buyer: SELLER }, `Invalid request: buyer ${SELLER} is not a funded buyer of cronos-testnet`],
      [{ ...good, network: "cronos-mainnet" }, 'Invalid request: network "cronos-mainnet" has no local buyers here'],
      [{ ...good, network: undefined }, "Invalid request: network is required"],
    ];
    for (const [body, error] of cases) {
      const answer = await pay(body);
      expect(answer, JSON.stringify(body)).to.deep.equal({ status: 400, body: { error } });
    }
    const notJson = await fetch(`${url}dashboard/api/local/pay`, { method: "POST", headers: { "Content-Type": "application/json", Origin: new URL(url).origin }, body: "{not json" });
    expect({ status: notJson.status, body: await notJson.json() }).to.deep.equal({ status: 400, body: { error: "Invalid request: body is not valid JSON" } });
    expect(await balance(BUYER.address)).to.equal(before);
  });
});

describe("local stack with DASHBOARD=false", () => {
  it("serves no page and no local routes", async () => {
    const stack = await startTestStack({ hre, ...EPHEMERAL, networks: ["cronos-testnet"], buyers: 1, env: { DASHBOARD: "false" } });
    try {
      expect(stack.dashboardUrl).to.equal(undefined);
      for (const path of ["/", "/dashboard/api/local/buyers"]) {
        const response = await fetch(`${stack.facilitatorUrl}${path}`);
        expect(response.status, path).to.equal(404);
      }
    } finally {
      await stack.stop();
    }
  });
});

describe("local stack dashboard: local names only, and pay only from its own page (DNS rebinding)", function () {
  let stack: LocalStack;
  let base: string;
  let port: string;
  const MISDIRECTED = { error: RequestError.misdirected };
  const FOREIGN_ORIGIN = { error: RequestError.foreignOrigin };
  const balance = async (address: string) => {
    const network = stack.networks["cronos-testnet"]!;
    return BigInt(await rpc<string>(network.rpcUrl, "eth_call", [{ to: network.token, data: balanceOfData(address) }, "latest"]));
  };
  const PAY = JSON.stringify({ network: "cronos-testnet", buyer: BUYER.address, amount: "0.01", scenario: "pay" });
  /** A playground payment as a page would send it, with this Host and Origin. */
  const pay = (host: string | null, origin?: string) =>
    rawRequest(`${base}/dashboard/api/local/pay`, {
      host,
      method: "POST",
      headers: { "Content-Type": "application/json", ...(origin === undefined ? {} : { Origin: origin }) },
      body: PAY,
    });

  before(async () => {
    stack = await startTestStack({ hre, ...EPHEMERAL, networks: ["cronos-testnet"], buyers: 1, buyerBalance: 10_000_000n });
    base = stack.facilitatorUrl;
    port = new URL(base).port;
  });
  after(async () => {
    await stack?.stop();
  });

  it("answers a Host it was not given 421 JSON on the page, its assets, its API, its stream and the playground: no key handed out, nothing spent", async () => {
    const before = await balance(BUYER.address);
    const hosts: Array<string | null> = [
      "evil.attacker.com", // a rebinding name, resolved to 127.0.0.1
      `evil.attacker.com:${port}`,
      `EVIL.Attacker.COM:${port}`,
      `localhost.attacker.com:${port}`,
      `127.0.0.1.nip.io:${port}`,
      `[2001:db8::1]:${port}`, // an IPv6 literal that is not loopback
      `::1`, // an IPv6 literal without brackets is no Host
      `localhost@evil.attacker.com`,
      `localhost:${port}/x`,
      "",
    ];
    for (const host of hosts) {
      for (const path of ["/", "/dashboard/app.js", "/dashboard/style.css", "/dashboard/api/networks", "/dashboard/api/feed", "/dashboard/api/local/buyers", "/dashboard/events"]) {
        const answer = await rawRequest(`${base}${path}`, { host });
        expect([answer.status, answer.headers["content-type"], answer.body], `${host} ${path}`).to.deep.equal([421, "application/json; charset=utf-8", MISDIRECTED]);
      }
      // Even with the Origin a rebinding page has (its own name), pay is refused on the name.
      const paid = await pay(host, host ? `http://${host}` : undefined);
      expect([paid.status, paid.body], `${host} pay`).to.deep.equal([421, MISDIRECTED]);
    }
    // No Host at all: Node's HTTP server refuses an HTTP/1.1 request without one (400) before any route.
    for (const path of ["/dashboard/api/local/buyers", "/dashboard/api/local/pay"]) {
      expect((await rawRequest(`${base}${path}`, { host: null })).status, path).to.equal(400);
    }
    expect((await pay(null, base)).status).to.equal(400);
    expect(await balance(BUYER.address)).to.equal(before);
  });

  it("answers the loopback names on any port, in any case, with or without a trailing dot", async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `LOCALHOST:${port}`, "localhost", "localhost.", `[0:0:0:0:0:0:0:1]:${port}`, "127.0.0.1:1"]) {
      const answer = await rawRequest(`${base}/dashboard/api/local/buyers`, { host });
      expect([answer.status, answer.body.buyers?.[0]?.address], host).to.deep.equal([200, BUYER.address]);
    }
    const page = await rawRequest(`${base}/`, { host: `localhost:${port}` });
    expect([page.status, page.headers["content-type"]]).to.deep.equal([200, "text/html; charset=utf-8"]);
  });

  it("pays only with the page's own Origin: missing, foreign, null, another port, scheme or local name is 403 JSON and spends nothing", async () => {
    const host = `127.0.0.1:${port}`;
    const before = await balance(BUYER.address);
    for (const origin of [undefined, "http://evil.attacker.com", `http://evil.attacker.com:${port}`, "null", `http://127.0.0.1:${Number(port) + 1}`, `https://127.0.0.1:${port}`, `http://localhost:${port}`, "not an origin"]) {
      const answer = await pay(host, origin);
      expect([answer.status, answer.body], String(origin)).to.deep.equal([403, FOREIGN_ORIGIN]);
    }
    expect(await balance(BUYER.address)).to.equal(before);

    const paid = await pay(host, `http://${host}`);
    expect([paid.status, paid.body.steps?.map((step: { route: string }) => step.route)]).to.deep.equal([200, ["verify", "settle"]]);
    expect(await balance(BUYER.address)).to.equal(before - 10_000n);
    // The same check in another local name's own terms.
    const viaLocalhost = await pay(`LOCALHOST:${port}`, `http://localhost:${port}`);
    expect(viaLocalhost.status).to.equal(200);
  });

  it("leaves the facilitator's own routes open to any Host while ALLOWED_HOSTS is unset (a CI container reaches the stack by a service name)", async () => {
    const supported = await rawRequest(`${base}/v2/x402/supported`, { host: `facilitator:${port}` });
    expect(supported.status).to.equal(200);
  });
});

describe("local stack with ALLOWED_HOSTS", () => {
  it("answers the configured names as well on the dashboard, and then on every route: other hosts are 421", async () => {
    const stack = await startTestStack({ hre, ...EPHEMERAL, networks: ["cronos-testnet"], buyers: 1, env: { ALLOWED_HOSTS: "dev.kit.test, 10.0.0.5" } });
    try {
      const base = stack.facilitatorUrl;
      for (const host of ["dev.kit.test:8402", "DEV.KIT.TEST", "10.0.0.5", "localhost"]) {
        expect((await rawRequest(`${base}/dashboard/api/local/buyers`, { host })).status, host).to.equal(200);
        expect((await rawRequest(`${base}/v2/x402/supported`, { host })).status, host).to.equal(200);
      }
      for (const path of ["/dashboard/api/local/buyers", "/v2/x402/supported", "/healthcheck"]) {
        const answer = await rawRequest(`${base}${path}`, { host: "other.kit.test" });
        expect([answer.status, answer.body], path).to.deep.equal([421, { error: RequestError.misdirected }]);
      }
    } finally {
      await stack.stop();
    }
  });
});
