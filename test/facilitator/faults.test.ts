import { expect } from "chai";
import request from "supertest";
import { custom } from "viem";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { openChain } from "../helpers/token.js";
import { createTestFacilitator, HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { withoutAutomine } from "../helpers/mining.js";
import { openProxiedChain, startFacilitatorOnProxies, type ProxiedChain } from "../helpers/proxied-chain.js";
import { RELAYER } from "../helpers/settle.js";
import { withoutTimestamp } from "../helpers/time.js";

/** Nothing was sent and nothing spent: the relayer's next nonce (pending included) as before, the authorization unused. */
async function expectNothingSent(proxied: ProxiedChain, nonceBefore: number, payment: Awaited<ReturnType<typeof makePayment>>): Promise<void> {
  const { chain } = proxied;
  expect(await chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" }), "the relayer's next nonce").to.equal(nonceBefore);
  expect(await chain.contract.read.authorizationState([payment.payer.address, payment.message.nonce]), "authorizationState").to.equal(false);
  expect(proxied.proxies[0]!.broadcasts, "transactions sent through the RPC").to.deep.equal([]);
}

function config(env: Record<string, string> = {}) {
  return loadConfig(
    { RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, RATE_LIMIT_VERIFY_PER_MINUTE: "0", RATE_LIMIT_SETTLE_PER_MINUTE: "0", POLLING_INTERVAL_MS: "20", ...env },
    { embedded: ["cronos-testnet"] },
  );
}

describe("facilitator under faults", () => {
  it("answers Transaction failed on-chain with the tx hash when a sent settle reverts in its block", async () => {
    const chain = await openChain("cronos-testnet");
    const provider = chain.connection.provider;
    // The simulation answers before a competing state change lands: emulate the race by letting
    // eth_estimateGas see the unpaused token, then pausing before the transaction is mined.
    const racing = custom({
      async request(args: { method: string; params?: unknown }) {
        if (args.method === "eth_estimateGas") {
          const gas = await provider.request(args as never);
          await chain.contract.write.pause();
          return gas;
        }
        return provider.request(args as never);
      },
    });
    const { app } = await createTestFacilitator(config(), { transports: { "cronos-testnet": racing } });
    const payment = await makePayment(chain);
    const answer = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(answer.status).to.equal(200);
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: answer.body.txHash });
    expect(receipt.status).to.equal("reverted");
    expect(withoutTimestamp(answer.body)).to.deep.equal({
      x402Version: 1,
      event: "payment.failed",
      network: "cronos-testnet",
      error: "Transaction failed on-chain",
      txHash: receipt.transactionHash,
    });
    expect(await chain.contract.read.authorizationState([payment.payer.address, payment.message.nonce])).to.equal(false);
  });

  it("answers payment.failed with the tx hash when the receipt does not come in time, and never settles twice", async () => {
    const chain = await openChain("cronos-testnet");
    const { app } = await createTestFacilitator(config({ SETTLE_TIMEOUT_SECONDS: "1" }), {
      transports: { "cronos-testnet": custom(chain.connection.provider) },
    });
    const payment = await makePayment(chain);
    const { answer, sent } = await withoutAutomine(chain.connection.provider, async () => {
      const answer = await request(app).post("/v2/x402/settle").send(payment.body);
      expect(answer.status).to.equal(200);
      const sent = answer.body.txHash as `0x${string}`;
      expect(sent).to.match(/^0x[0-9a-f]{64}$/);
      // Answered while its transaction still waits in the pool, unmined: settle stopped waiting at its
      // time-out, not at a receipt. Then mine it.
      expect((await chain.publicClient.getBlock({ blockTag: "pending" })).transactions).to.deep.equal([sent]);
      await chain.networkHelpers.mine();
      return { answer, sent };
    });
    expect(withoutTimestamp(answer.body)).to.deep.equal({
      x402Version: 1,
      event: "payment.failed",
      network: "cronos-testnet",
      error: "Transaction failed on-chain",
      txHash: sent,
    });
    // Mined now: a retried settle finds the authorization spent.
    expect((await chain.publicClient.getTransactionReceipt({ hash: sent })).status).to.equal("success");
    const retried = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(withoutTimestamp(retried.body)).to.deep.equal({
      x402Version: 1,
      event: "payment.failed",
      network: "cronos-testnet",
      error: "Authorization already used",
      txHash: sent,
    });
    expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(1_000_000n);
  });

  it("answers within the RPC time-out when the RPC never answers (verify 500, settle 503), sends nothing, and settles once it answers again", async () => {
    const proxied = await openProxiedChain();
    const [proxy] = proxied.proxies;
    const running = await startFacilitatorOnProxies(proxied, { RPC_TIMEOUT_MS: "300" });
    const { app } = running.facilitator;
    const payment = await makePayment(proxied.chain);
    const nonceBefore = await proxied.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
    // Every request is held, never answered: an answer at all means the facilitator gave up on the node.
    proxy!.fail({ kind: "hang" });
    const verify = await request(app).post("/v2/x402/verify").send(payment.body);
    expect(verify.status).to.equal(500);
    expect(verify.body.invalidReason).to.equal("Service unavailable: cannot read cronos-testnet state");
    const heldForVerify = proxy!.faulted;
    expect(heldForVerify, "requests the node never answered").to.be.above(0);
    const settle = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(settle.status).to.equal(503);
    expect(proxy!.faulted, "requests the node never answered").to.be.above(heldForVerify);
    await expectNothingSent(proxied, nonceBefore, payment);
    proxy!.clear();
    const recovered = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(recovered.body.event).to.equal("payment.settled");
    expect(await proxied.chain.contract.read.balanceOf([payment.payTo])).to.equal(1_000_000n);
  });

  it("answers verify 500 and settle 503 at once when the RPC port is closed, and sends nothing", async () => {
    const proxied = await openProxiedChain();
    const running = await startFacilitatorOnProxies(proxied);
    const { app } = running.facilitator;
    const payment = await makePayment(proxied.chain);
    const nonceBefore = await proxied.chain.publicClient.getTransactionCount({ address: RELAYER, blockTag: "pending" });
    await proxied.proxies[0]!.kill();
    const verify = await request(app).post("/v2/x402/verify").send(payment.body);
    expect(verify.status).to.equal(500);
    const settle = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(settle.status).to.equal(503);
    // Not a verdict (no `event`): nothing was sent, and a retry may settle.
    expect(settle.headers["retry-after"]).to.equal("2");
    expect(withoutTimestamp(settle.body)).to.deep.equal({
      x402Version: 1,
      network: "cronos-testnet",
      error: "Service unavailable: cannot read cronos-testnet state",
    });
    await expectNothingSent(proxied, nonceBefore, payment);
  });
});
