import { expect } from "chai";
import request from "supertest";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { Address } from "viem";
import { startCluster, type Cluster } from "../../src/harness/cluster.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { SettleError } from "../../src/protocol/reasons.js";
import { makePayment, openFacilitator } from "../helpers/facilitator.js";
import { post } from "../helpers/instances.js";
import { tokenBalance } from "../helpers/chain.js";

// Issue 20: the per-payer settle quota is spent only by settles whose signature is proven the payer's.

const SELLER_KEY = "seller-a-0123456789abcdef";
const ATTACKER_KEY = "attacker-0123456789abcdef";

/** Production defaults for every limit (an empty value is the default). */
const DEFAULT_LIMITS = { RATE_LIMIT_VERIFY_PER_MINUTE: "", RATE_LIMIT_SETTLE_PER_MINUTE: "", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "" };

describe("payer settle quota: only the payer can spend it", () => {
  it("with the production defaults and API keys: 125 forged settles naming a victim leave it untouched; the victim then settles 30 in a row", async function () {
    this.timeout(120_000);
    const opened = await openFacilitator("cronos-testnet", { ...DEFAULT_LIMITS, API_KEYS: `${SELLER_KEY},${ATTACKER_KEY}` });
    expect(opened.config.rateLimits.payerSettlePerMinute).to.equal(120);
    const victim = opened.buyer;
    const attacker = privateKeyToAccount(generatePrivateKey());
    const forged = [];
    for (let i = 0; i < 125; i++) {
      const { body } = await makePayment(opened.chain, { payer: victim, signer: attacker });
      forged.push(await request(opened.app).post("/v2/x402/settle").set("Authorization", `Bearer ${ATTACKER_KEY}`).send(body));
    }
    // The forgeries count against the attacker's own key (120 a minute), never against the payer they name.
    expect(forged.slice(0, 120).every((r) => r.status === 200 && r.body.event === "payment.failed" && r.body.error === SettleError.invalidSignature)).to.equal(true);
    expect(forged.slice(120).map((r) => [r.status, r.body.error])).to.deep.equal(Array(5).fill([429, "Too many requests"]));

    const before = await opened.chain.contract.read.balanceOf([victim.address]);
    const honest = [];
    for (let i = 0; i < 30; i++) {
      const { body } = await makePayment(opened.chain, { payer: victim });
      honest.push(await request(opened.app).post("/v2/x402/settle").set("Authorization", `Bearer ${SELLER_KEY}`).send(body));
    }
    expect(honest.map((r) => [r.status, r.body.event])).to.deep.equal(Array(30).fill([200, "payment.settled"]));
    expect(await opened.chain.contract.read.balanceOf([victim.address])).to.equal(before - 30n * 1_000_000n);
  });

  it("without API keys, forged settles from another client do not spend the payer's quota (RATE_LIMIT_PAYER_SETTLE_PER_MINUTE=2)", async () => {
    const opened = await openFacilitator("cronos-testnet", { RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "2" });
    const victim = opened.buyer;
    const attacker = privateKeyToAccount(generatePrivateKey());
    for (let i = 0; i < 10; i++) {
      const { body } = await makePayment(opened.chain, { payer: victim, signer: attacker });
      const forged = await request(opened.app).post("/v2/x402/settle").send(body);
      expect([forged.status, forged.body.error]).to.deep.equal([200, SettleError.invalidSignature]);
    }
    const settle = async () => request(opened.app).post("/v2/x402/settle").send((await makePayment(opened.chain, { payer: victim })).body);
    expect((await settle()).body.event).to.equal("payment.settled");
    expect((await settle()).body.event).to.equal("payment.settled");
    // The payer's own third settle in the minute is what its quota stops.
    const third = await settle();
    expect(third.status).to.equal(429);
    expect(third.body).to.deep.equal({ error: "Too many requests", retryAfter: third.body.retryAfter });
  });

  describe("several instances sharing PostgreSQL", () => {
    let cluster: Cluster;
    before(async function () {
      this.timeout(120_000);
      cluster = await startCluster({
        instances: 2,
        env: { TRUST_PROXY: "1", RATE_LIMIT_SETTLE_PER_MINUTE: "0", RATE_LIMIT_PAYER_SETTLE_PER_MINUTE: "3", POLLING_INTERVAL_MS: "100", HEAD_CACHE_MS: "0" },
      });
    });
    after(() => cluster?.stop());

    it("forged settles naming a victim, spread over the instances, leave the shared quota to the victim", async function () {
      this.timeout(120_000);
      const { chain, instances } = cluster;
      const info = NETWORKS[chain.network];
      const on = { publicClient: chain.publicClient, info, token: chain.token };
      const victim = privateKeyToAccount(chain.buyers[0]!.privateKey);
      const attacker = privateKeyToAccount(generatePrivateKey());
      const payTo: Address = privateKeyToAccount(generatePrivateKey()).address;
      for (let i = 0; i < 8; i++) {
        const { body } = await makePayment(on, { payer: victim, signer: attacker, payTo });
        const forged = await post(instances[i % 2]!.url, "/v2/x402/settle", body, "10.66.66.66");
        expect([forged.status, forged.body.error]).to.deep.equal([200, SettleError.invalidSignature]);
      }
      // The victim's three settles of the minute (the shared quota is 3) succeed, on either instance.
      for (let i = 0; i < 3; i++) {
        const { body } = await makePayment(on, { payer: victim, payTo });
        const answer = await post(instances[i % 2]!.url, "/v2/x402/settle", body);
        expect([answer.status, answer.body.event]).to.deep.equal([200, "payment.settled"]);
      }
      expect(await tokenBalance(chain.rpcUrl, chain.token, payTo)).to.equal(3_000_000n);
      // The fourth, on the other instance, is over the one quota both count.
      const { body } = await makePayment(on, { payer: victim, payTo });
      const fourth = await post(instances[1]!.url, "/v2/x402/settle", body);
      expect(fourth.status).to.equal(429);
      expect(fourth.body.error).to.equal("Too many requests");
      expect(await tokenBalance(chain.rpcUrl, chain.token, payTo)).to.equal(3_000_000n);
    });
  });
});
