import { expect } from "chai";
import { privateKeyToAccount } from "viem/accounts";
import { ConfigError, loadConfig } from "../../src/facilitator/config/index.js";
import { EMBEDDED_LEDGER_NOTE } from "../../src/facilitator/coordination.js";
import { StartupError } from "../../src/facilitator/startup-error.js";
import type { RunningFacilitator } from "../../src/facilitator/start.js";
import { waitUntil } from "../helpers/wait.js";
import { configRefusal } from "../helpers/config.js";
import { HARDHAT_KEYS, makePayment, recordingLogger } from "../helpers/facilitator.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import { fetchJson } from "../helpers/http.js";
import { setAutomine } from "../helpers/mining.js";
import { rejection } from "../helpers/reject.js";
import type { FaultProxy } from "../helpers/rpc-proxy.js";

const RELAYER = privateKeyToAccount(HARDHAT_KEYS.relayer).address;
const SELLER = privateKeyToAccount(HARDHAT_KEYS.seller).address;
const AMOUNT = 1_000_000n;

const post = (running: RunningFacilitator, route: string, body: unknown) => fetchJson(`${running.url}/v2/x402/${route}`, { body, headers: { "X402-Version": "1" } });
const health = (running: RunningFacilitator) => fetchJson(`${running.url}/healthcheck`);

/** The value of `x402_rpc_endpoint_up` for each endpoint label of cronos-testnet. */
async function endpointsUp(running: RunningFacilitator): Promise<Record<string, number>> {
  const metric = await running.facilitator.metrics.registry.getSingleMetric("x402_rpc_endpoint_up")!.get();
  return Object.fromEntries(metric.values.map((v) => [String(v.labels.endpoint), v.value]));
}

/** The relayer's next nonce, counting its transactions in the pool. */
function relayerNonce(proxied: ProxiedChain): Promise<number> {
  return proxied.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
}

function balanceOf(proxied: ProxiedChain, address: `0x${string}`): Promise<bigint> {
  return proxied.chain.contract.read.balanceOf([address]);
}

describe("RPC failover: several RPC URLs per network", () => {
  describe("configuration", () => {
    const load = (url: string) => loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: url });

    it("takes several URLs, comma-separated, in order", () => {
      const config = load(" https://a.example/v2/KEY , wss://b.example ");
      expect(config.networks[0]!.rpcUrls).to.deep.equal(["https://a.example/v2/KEY", "wss://b.example"]);
      expect(load("https://a.example").networks[0]!.rpcUrls).to.deep.equal(["https://a.example"]);
    });

    it("refuses an empty, malformed or repeated URL in the list, naming its place and never its text", () => {
      const cases: Array<[string, string]> = [
        ["https://a.example,,https://b.example", "CRONOS_TESTNET_RPC_URL: URL #2 is empty (URLs are separated by single commas)"],
        ["https://a.example,", "CRONOS_TESTNET_RPC_URL: URL #2 is empty (URLs are separated by single commas)"],
        ["https://a.example,ftp://secret.example/KEY", "CRONOS_TESTNET_RPC_URL: URL #2 must be an http(s) or ws(s) URL"],
        ["secret-host/KEY", "CRONOS_TESTNET_RPC_URL: must be an http(s) or ws(s) URL"],
        ["https://a.example/KEY,https://b.example,https://a.example/KEY", "CRONOS_TESTNET_RPC_URL: URL #3 repeats URL #1"],
      ];
      for (const [value, message] of cases) {
        expect(configRefusal({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: value }, value), value).to.equal(message);
      }
    });

    it("RPC_RANK_INTERVAL_MS: at least 50 ms", () => {
      expect(loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: "https://a.example" }).rpcRankIntervalMs).to.equal(1_000);
      expect(() => loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: "https://a.example", RPC_RANK_INTERVAL_MS: "10" })).to.throw(
        ConfigError,
        'RPC_RANK_INTERVAL_MS: must be an integer >= 50, got "10"',
      );
    });
  });

  describe("start-up", () => {
    it("stops when one URL reports another chain id, naming it by scheme, host and place (never its path or query)", async () => {
      const testnet = await openProxiedChain(1);
      const mainnet = await openProxiedChain(1, "cronos-mainnet");
      const wrong = mainnet.proxies[0]!;
      const error = await rejection(
        startFacilitatorOnProxies(testnet, { CRONOS_TESTNET_RPC_URL: `${testnet.rpcUrls}/v2/SECRET-A,${wrong.url}/v2/SECRET-B?apikey=SECRET-C` }),
        StartupError,
      );
      expect(error.message).to.equal(`cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC at ${wrong.url} (URL #2 of 2) reports chain id 25, expected 338`);
    });

    it("starts while one URL does not answer, logs it, and reports it in /healthcheck while staying healthy", async () => {
      const proxied = await openProxiedChain(2);
      const [first, second] = proxied.proxies as [FaultProxy, FaultProxy];
      await first.kill();
      const { logger, lines } = recordingLogger();
      const running = await startFacilitatorOnProxies(proxied, {}, { logger });
      try {
        // Besides the embedded ledger's line (at warn too: this instance's ledger is its own).
        expect(lines.filter((line) => line.level === "warn" && line.message !== EMBEDDED_LEDGER_NOTE).map((line) => [line.message, line.fields])).to.deep.equal([
          [
            "an RPC URL does not answer at start-up; the others serve",
            { network: "cronos-testnet", problem: `the RPC at ${first.url} (URL #1 of 2) does not answer (connection refused)` },
          ],
        ]);
        const answer = await health(running);
        expect(answer.status).to.equal(200);
        expect(answer.body.status).to.equal("success");
        const block = Number(await proxied.chain.publicClient.getBlockNumber({ cacheTime: 0 }));
        const network = answer.body.results.networks["cronos-testnet"];
        expect(network.ok).to.equal(true);
        expect(network.rpc).to.deep.equal([
          { url: `${first.url} (URL #1 of 2)`, ok: false, error: "connection refused" },
          { url: `${second.url} (URL #2 of 2)`, ok: true, chainId: 338, blockNumber: block },
        ]);
        const warning = `the RPC at ${first.url} (URL #1 of 2) does not answer (connection refused); the others serve`;
        expect(network.warnings).to.deep.equal([{ variable: "CRONOS_TESTNET_RPC_URL", message: warning }]);
        expect(answer.body.results.message).to.equal(`OK (cronos-testnet: CRONOS_TESTNET_RPC_URL: ${warning})`);
        const payment = await makePayment(proxied.chain);
        const settled = await post(running, "settle", payment.body);
        expect([settled.status, settled.body.event]).to.deep.equal([200, "payment.settled"]);
      } finally {
        await running.close();
        await proxied.close();
      }
    });

    it("stops when no URL answers, naming each", async () => {
      const proxied = await openProxiedChain(2);
      const [first, second] = proxied.proxies;
      await first!.kill();
      await second!.kill();
      try {
        let error: unknown;
        try {
          await startFacilitatorOnProxies(proxied);
        } catch (caught) {
          error = caught;
        }
        expect((error as Error).message).to.equal(
          `cronos-testnet: CRONOS_TESTNET_RPC_URL: no RPC answers: the RPC at ${first!.url} (URL #1 of 2) does not answer (connection refused); the RPC at ${second!.url} (URL #2 of 2) does not answer (connection refused)`,
        );
      } finally {
        await proxied.close();
      }
    });
  });

  describe("serving", () => {
    let proxied: ProxiedChain;
    let running: RunningFacilitator | undefined;
    beforeEach(async () => {
      proxied = await openProxiedChain(2);
    });
    afterEach(async () => {
      await running?.close();
      running = undefined;
      await setAutomine(proxied.chain.connection.provider, true);
      await proxied.close();
    });

    it("with one of two URLs killed in the middle of a verify load: fewer than 0.1 % of verifies fail, every settle completes, /healthcheck reports the dead URL and stays healthy", async () => {
      // Verify's own reads (one per verify) are what is spread over the URLs here: no state index, which would
      // answer most verifies from memory (it follows the chain through failover too: test/state).
      running = await startFacilitatorOnProxies(proxied, { RPC_RANK_INTERVAL_MS: "100", STATE_INDEX: "false" });
      const [first, second] = proxied.proxies as [FaultProxy, FaultProxy];
      const verifier = privateKeyToAccount(HARDHAT_KEYS.buyer2);
      const VERIFIES = 2_000;
      const SETTLE_EVERY = 100;
      // Distinct authorizations: each verify reads its own nonce's state (and the head) from the chain.
      const payments = await Promise.all(Array.from({ length: VERIFIES }, () => makePayment(proxied.chain, { payer: verifier })));
      const payeeBefore = await balanceOf(proxied, SELLER);
      const nonceBefore = await relayerNonce(proxied);
      let done = 0;
      let failedVerifies = 0;
      let killed: Promise<void> | undefined;
      const settles: Array<Promise<{ status: number; body: Record<string, unknown> }>> = [];
      const firstRequestsAtKill: { count?: number } = {};
      let next = 0;
      const worker = async () => {
        while (next < VERIFIES) {
          const index = next++;
          if (index % SETTLE_EVERY === 0) settles.push(makePayment(proxied.chain).then((payment) => post(running!, "settle", payment.body)));
          const answer = await post(running!, "verify", payments[index]!.body).catch(() => undefined);
          if (answer?.status !== 200 || answer.body.isValid !== true) failedVerifies++;
          if (++done === VERIFIES / 2) {
            firstRequestsAtKill.count = first.methods.length;
            killed = first.kill();
          }
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      await killed;
      const settled = await Promise.all(settles);

      console.log(`      verifies failed: ${failedVerifies} of ${VERIFIES}; settles: ${settled.length}`);
      expect(failedVerifies / VERIFIES).to.be.below(0.001);
      // The first URL served the first half (it is the preferred one), the second took over.
      expect(firstRequestsAtKill.count).to.be.above(VERIFIES / 2);
      // Each verify reads its authorization's state (an eth_call): the second URL served the second half.
      expect(second.count("eth_call")).to.be.above(VERIFIES / 2 - 100);
      expect(settled.map((s) => [s.status, s.body.event])).to.deep.equal(Array(VERIFIES / SETTLE_EVERY).fill([200, "payment.settled"]));
      expect(await balanceOf(proxied, SELLER)).to.equal(payeeBefore + BigInt(settled.length) * AMOUNT);
      expect(await relayerNonce(proxied)).to.equal(nonceBefore + settled.length);

      const answer = await health(running);
      expect([answer.status, answer.body.status]).to.deep.equal([200, "success"]);
      const rpc = answer.body.results.networks["cronos-testnet"].rpc;
      expect(rpc.map((endpoint: any) => [endpoint.url, endpoint.ok, endpoint.error])).to.deep.equal([
        [`${first.url} (URL #1 of 2)`, false, "connection refused"],
        [`${second.url} (URL #2 of 2)`, true, undefined],
      ]);
      expect(answer.body.results.message).to.equal(
        `OK (cronos-testnet: CRONOS_TESTNET_RPC_URL: the RPC at ${first.url} (URL #1 of 2) does not answer (connection refused); the others serve)`,
      );
      // The ranking pings saw it too.
      expect(await waitUntil(async () => (await endpointsUp(running!))[`${first.url} (URL #1 of 2)`] === 0, 10_000)).to.equal(true);
      expect((await endpointsUp(running))[`${second.url} (URL #2 of 2)`]).to.equal(1);
    });

    it("puts a URL that stops answering after the others once a ranking ping fails, and back first once it answers again", async () => {
      // Every verify reads the chain (no state index answering from memory): where its reads go is the ranking's order.
      running = await startFacilitatorOnProxies(proxied, { RPC_RANK_INTERVAL_MS: "50", RPC_TIMEOUT_MS: "60000", STATE_INDEX: "false" });
      const [first, second] = proxied.proxies as [FaultProxy, FaultProxy];
      const firstLabel = `${first.url} (URL #1 of 2)`;
      const verifyOnce = async () => {
        const payment = await makePayment(proxied.chain);
        const answer = await post(running!, "verify", payment.body);
        expect([answer.status, answer.body.isValid]).to.deep.equal([200, true]);
      };
      // The ranking's pings (eth_chainId and eth_blockNumber) are not reads.
      const readsOf = (proxy: FaultProxy) => proxy.methods.filter((method) => method !== "eth_blockNumber" && method !== "eth_chainId").length;
      // A node that takes requests and never answers: a request sent to it would wait out RPC_TIMEOUT_MS (60 s).
      first.fail({ kind: "hang" });
      expect(await waitUntil(async () => (await endpointsUp(running!))[firstLabel] === 0, 20_000)).to.equal(true);
      const hungBefore = readsOf(first);
      const secondBefore = readsOf(second);
      await verifyOnce();
      expect(readsOf(first)).to.equal(hungBefore);
      expect(readsOf(second)).to.be.above(secondBefore);

      first.clear();
      // Ten good pings in a row put it back in its place.
      expect(
        await waitUntil(async () => {
          const before = readsOf(first);
          await verifyOnce();
          return readsOf(first) > before;
        }, 20_000),
      ).to.equal(true);
    });

    it("settles once when the first URL took the transaction and died before answering (mined at once: the second says nonce too low)", async () => {
      running = await startFacilitatorOnProxies(proxied);
      const [first, second] = proxied.proxies as [FaultProxy, FaultProxy];
      first.fail({ kind: "swallow", method: "eth_sendRawTransaction", times: 1, then: () => first.kill() });
      const nonceBefore = await relayerNonce(proxied);
      const payeeBefore = await balanceOf(proxied, SELLER);
      const payment = await makePayment(proxied.chain);
      const answer = await post(running, "settle", payment.body);
      expect([answer.status, answer.body.event]).to.deep.equal([200, "payment.settled"]);
      expect(second.count("eth_sendRawTransaction")).to.equal(1);
      const receipt = await proxied.chain.publicClient.getTransactionReceipt({ hash: answer.body.txHash as `0x${string}` });
      expect(receipt.status).to.equal("success");
      expect(await relayerNonce(proxied)).to.equal(nonceBefore + 1);
      expect(await balanceOf(proxied, SELLER)).to.equal(payeeBefore + AMOUNT);
      // The relayer's key keeps settling, through the second URL.
      const again = await post(running, "settle", (await makePayment(proxied.chain)).body);
      expect([again.status, again.body.event]).to.deep.equal([200, "payment.settled"]);
      expect(await relayerNonce(proxied)).to.equal(nonceBefore + 2);
    });

    it("settles once when the first URL took the transaction and died before answering (in the pool: the second says already known)", async () => {
      running = await startFacilitatorOnProxies(proxied);
      const [first] = proxied.proxies as [FaultProxy];
      await first.chain.automine(false);
      first.fail({ kind: "swallow", method: "eth_sendRawTransaction", times: 1, then: () => first.kill() });
      const nonceBefore = await relayerNonce(proxied);
      const payeeBefore = await balanceOf(proxied, SELLER);
      const payment = await makePayment(proxied.chain);
      const settling = post(running, "settle", payment.body);
      expect(await waitUntil(async () => (await relayerNonce(proxied)) === nonceBefore + 1, 20_000, 10)).to.equal(true);
      const [pending] = await proxied.proxies[1]!.chain.pending();
      await proxied.proxies[1]!.chain.mine();
      const answer = await settling;
      expect([answer.status, answer.body.event, answer.body.txHash]).to.deep.equal([200, "payment.settled", pending]);
      expect(await relayerNonce(proxied)).to.equal(nonceBefore + 1);
      expect(await balanceOf(proxied, SELLER)).to.equal(payeeBefore + AMOUNT);
    });

    it("with one URL, settles once when the answer to the send is lost after the node took it (found by its hash, not sent again)", async () => {
      const [only] = proxied.proxies as [FaultProxy];
      running = await startFacilitatorOnProxies(proxied, { CRONOS_TESTNET_RPC_URL: only.url });
      only.fail({ kind: "swallow", method: "eth_sendRawTransaction", times: 1 });
      const nonceBefore = await relayerNonce(proxied);
      const payeeBefore = await balanceOf(proxied, SELLER);
      const answer = await post(running, "settle", (await makePayment(proxied.chain)).body);
      expect([answer.status, answer.body.event]).to.deep.equal([200, "payment.settled"]);
      // Sent once: the node had taken it, and the transaction was found by its hash rather than sent again.
      expect(only.count("eth_sendRawTransaction")).to.equal(1);
      expect(only.count("eth_getTransactionByHash")).to.equal(1);
      expect(await relayerNonce(proxied)).to.equal(nonceBefore + 1);
      expect(await balanceOf(proxied, SELLER)).to.equal(payeeBefore + AMOUNT);
    });
  });
});
