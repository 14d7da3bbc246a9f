import { expect } from "chai";
import hre from "hardhat";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { localAccount } from "../../src/harness/accounts.js";
import { PortInUseError } from "../../src/harness/errors.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { occupyPort, portIsFree } from "../helpers/http.js";
import { rejection } from "../helpers/reject.js";
import { balanceOfData, rpc } from "../helpers/rpc.js";
import { startTestStack } from "../helpers/seller.js";

const EPHEMERAL = { port: 0, rpcPorts: { "cronos-testnet": 0, "cronos-mainnet": 0 } } as const;

function portOf(url: string): number {
  return Number(new URL(url).port);
}

describe("local stack in one process (src/harness/stack.ts)", function () {
  let stack: LocalStack | undefined;
  afterEach(async () => {
    await stack?.stop();
    stack = undefined;
  });

  it("starts both chains and a facilitator that supports both networks; stop frees every port", async () => {
    stack = await startTestStack({ hre, ...EPHEMERAL });
    expect(Object.keys(stack.networks)).to.have.members(["cronos-testnet", "cronos-mainnet"]);
    expect(stack.relayer).to.equal(localAccount(9).address);
    for (const [name, network] of Object.entries(stack.networks)) {
      const info = NETWORKS[name as keyof typeof NETWORKS];
      expect(network.chainId).to.equal(info.chainId);
      expect(network.viemChain).to.equal(name === "cronos-testnet" ? "cronosTestnet" : "cronos");
      expect(network.token).to.equal(info.token);
      expect(network.domain).to.deep.equal(info.domain);
      expect(network.buyers).to.have.length(3);
      expect(Object.keys(network.buyers[0]!)).to.have.members(["address", "privateKey"]);
      expect(Number.parseInt(await rpc<string>(network.rpcUrl, "eth_chainId"), 16)).to.equal(info.chainId);
      expect(network.wsUrl).to.equal(`ws://127.0.0.1:${portOf(network.rpcUrl)}`);
      expect(network.wsUrl).to.equal(stack.chains[name as keyof typeof NETWORKS]!.wsUrl);
    }
    const supported = (await (await fetch(`${stack.facilitatorUrl}/v2/x402/supported`)).json()) as { kinds: Array<{ network: string }> };
    expect(supported.kinds.map((k) => k.network)).to.have.members(["cronos-testnet", "cronos-mainnet", "eip155:338", "eip155:25"]);
    // No rate limit by default: more requests than the facilitator's own default (10 a minute).
    for (let i = 0; i < 12; i++) {
      const response = await fetch(`${stack.facilitatorUrl}/v2/x402/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(response.status).to.not.equal(429);
    }

    const ports = [portOf(stack.facilitatorUrl), ...Object.values(stack.networks).map((n) => portOf(n.rpcUrl))];
    await stack.stop();
    stack = undefined;
    for (const port of ports) expect(await portIsFree(port), `port ${port} free after stop`).to.equal(true);
  });

  it("settles a payment signed with a buyer key through the facilitator, on chain", async () => {
    stack = await startTestStack({ hre, ...EPHEMERAL, networks: ["cronos-mainnet"], buyers: 1, buyerBalance: 5_000_000n });
    expect(Object.keys(stack.networks)).to.deep.equal(["cronos-mainnet"]);
    const network = stack.networks["cronos-mainnet"]!;
    const buyer = privateKeyToAccount(network.buyers[0]!.privateKey);
    const paymentRequirements = {
      scheme: "exact",
      network: "cronos-mainnet",
      payTo: stack.seller,
      asset: network.token,
      maxAmountRequired: "1250000",
      maxTimeoutSeconds: 300,
      description: "harness test",
      mimeType: "application/json",
    };
    const paymentHeader = await createPaymentHeader({ signer: buyer, requirements: paymentRequirements });
    const body = JSON.stringify({ x402Version: 1, paymentHeader, paymentRequirements });
    const post = (path: string) => fetch(`${stack!.facilitatorUrl}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });

    const verify = (await (await post("/v2/x402/verify")).json()) as { isValid: boolean; invalidReason: string | null };
    expect(verify).to.deep.equal({ isValid: true, invalidReason: null });
    const settle = (await (await post("/v2/x402/settle")).json()) as { event: string; txHash?: string };
    expect(settle.event, JSON.stringify(settle)).to.equal("payment.settled");

    const balance = async (address: string) => BigInt(await rpc<string>(network.rpcUrl, "eth_call", [{ to: network.token, data: balanceOfData(address) }, "latest"]));
    expect(await balance(stack.seller)).to.equal(1_250_000n);
    expect(await balance(buyer.address)).to.equal(3_750_000n);
    const receipt = await rpc<{ from: string; status: string }>(network.rpcUrl, "eth_getTransactionReceipt", [settle.txHash]);
    expect(receipt.status).to.equal("0x1");
    expect(receipt.from.toLowerCase()).to.equal(stack.relayer.toLowerCase());
  });

  it("passes rate limits to the facilitator", async () => {
    stack = await startTestStack({ hre, ...EPHEMERAL, networks: ["cronos-testnet"], buyers: 0, rateLimits: { verifyPerMinute: 1 } });
    const verify = () => fetch(`${stack!.facilitatorUrl}/v2/x402/verify`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect((await verify()).status).to.not.equal(429);
    expect((await verify()).status).to.equal(429);
  });

  it("refuses a taken facilitator port with PortInUseError before starting any chain", async () => {
    const holder = await occupyPort();
    try {
      // Hardhat with its chain starts counted: none may have begun when the refusal comes.
      let chainsStarted = 0;
      const network = new Proxy(hre.network, {
        get(target, key) {
          const value = Reflect.get(target, key, target) as unknown;
          if (typeof value !== "function") return value;
          return key === "create" ? (...args: unknown[]) => (chainsStarted++, (value as (...a: unknown[]) => unknown).apply(target, args)) : value.bind(target);
        },
      });
      const counting = new Proxy(hre, { get: (target, key) => (key === "network" ? network : Reflect.get(target, key, target)) });
      const error = await rejection(startTestStack({ hre: counting, ...EPHEMERAL, port: holder.port }), PortInUseError);
      expect(error.role).to.equal("facilitator");
      expect(error.port).to.equal(holder.port);
      expect(chainsStarted, "chains started before the refusal").to.equal(0);
    } finally {
      await holder.release();
    }
  });

  it("refuses a taken RPC port with PortInUseError naming that chain", async () => {
    const holder = await occupyPort();
    try {
      const error = await rejection(startTestStack({ hre, port: 0, rpcPorts: { "cronos-testnet": 0, "cronos-mainnet": holder.port } }), PortInUseError);
      expect(error.role).to.equal("cronos-mainnet-rpc");
    } finally {
      await holder.release();
    }
  });
});
