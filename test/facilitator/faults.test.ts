import { expect } from "chai";
import request from "supertest";
import { custom } from "viem";
import { loadConfig } from "../../src/facilitator/config/index.js";
import { createFacilitator } from "../../src/facilitator/server.js";
import { serveJsonRpc } from "../../src/harness/rpc-bridge.js";
import { openChain } from "../helpers/token.js";
import { HARDHAT_KEYS, makePayment } from "../helpers/facilitator.js";
import { withoutTimestamp } from "../helpers/time.js";


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
    const { app } = await createFacilitator(config(), { transports: { "cronos-testnet": racing } });
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
    const { app } = await createFacilitator(config({ SETTLE_TIMEOUT_SECONDS: "1" }), {
      transports: { "cronos-testnet": custom(chain.connection.provider) },
    });
    const payment = await makePayment(chain);
    await chain.connection.provider.request({ method: "evm_setAutomine", params: [false] });
    const started = Date.now();
    const answer = await request(app).post("/v2/x402/settle").send(payment.body);
    expect(Date.now() - started).to.be.below(5_000);
    expect(answer.status).to.equal(200);
    const sent = answer.body.txHash as `0x${string}`;
    expect(sent).to.match(/^0x[0-9a-f]{64}$/);
    expect(withoutTimestamp(answer.body)).to.deep.equal({
      x402Version: 1,
      event: "payment.failed",
      network: "cronos-testnet",
      error: "Transaction failed on-chain",
      txHash: sent,
    });
    // The transaction is still pending; mine it. A retried settle then finds the authorization spent.
    await chain.networkHelpers.mine();
    await chain.connection.provider.request({ method: "evm_setAutomine", params: [true] });
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

  it("answers within the RPC time-out when the RPC is very slow (verify 500, settle 503) and settles nothing", async () => {
    const chain = await openChain("cronos-testnet");
    const provider = chain.connection.provider;
    let delayMs = 0;
    const bridge = await serveJsonRpc(
      {
        async request(args) {
          if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
          return provider.request(args as never);
        },
      },
      { port: 0, role: "cronos-testnet-rpc" },
    );
    try {
      const { app } = await createFacilitator(
        loadConfig({
          RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer,
          CRONOS_TESTNET_RPC_URL: bridge.url,
          RPC_TIMEOUT_MS: "300",
          RATE_LIMIT_VERIFY_PER_MINUTE: "0",
          RATE_LIMIT_SETTLE_PER_MINUTE: "0",
        }),
      );
      const payment = await makePayment(chain);
      delayMs = 5_000;
      let started = Date.now();
      const verify = await request(app).post("/v2/x402/verify").send(payment.body);
      expect(verify.status).to.equal(500);
      expect(verify.body.invalidReason).to.equal("Service unavailable: cannot read cronos-testnet state");
      // One retry of a 300 ms time-out: well under the 5 s the RPC would take.
      expect(Date.now() - started).to.be.below(2_000);
      started = Date.now();
      const settle = await request(app).post("/v2/x402/settle").send(payment.body);
      expect(settle.status).to.equal(503);
      expect(Date.now() - started).to.be.below(2_000);
      delayMs = 0;
      expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(0n);
      const recovered = await request(app).post("/v2/x402/settle").send(payment.body);
      expect(recovered.body.event).to.equal("payment.settled");
      expect(await chain.contract.read.balanceOf([payment.payTo])).to.equal(1_000_000n);
    } finally {
      await bridge.close();
    }
  });

  it("answers verify 500 and settle 503 at once when the RPC port is closed", async () => {
    const chain = await openChain("cronos-testnet");
    const bridge = await serveJsonRpc(chain.connection.provider as never, { port: 0, role: "cronos-testnet-rpc" });
    const { app } = await createFacilitator(
      loadConfig({ RELAYER_PRIVATE_KEY: HARDHAT_KEYS.relayer, CRONOS_TESTNET_RPC_URL: bridge.url, RATE_LIMIT_VERIFY_PER_MINUTE: "0", RATE_LIMIT_SETTLE_PER_MINUTE: "0" }),
    );
    const payment = await makePayment(chain);
    await bridge.close();
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
  });
});
