import { expect } from "chai";
import type { Hex } from "viem";
import type { LocalStack } from "../../src/harness/stack.js";
import { expectSettlementOnChain, tokenBalances } from "../helpers/chain.js";
import { type Spawned, spawnInRoot } from "../helpers/processes.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";

describe("e2e: the example seller and buyer (scripts/example-*.ts) as processes against a local stack", function () {
  this.timeout(90_000);
  let stack: LocalStack;
  let seller: Spawned | undefined;
  let buyerProc: Spawned | undefined;

  before(async () => {
    stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"] });
  });
  after(async () => {
    buyerProc?.kill();
    seller?.kill();
    await stack?.stop();
  });

  it("the buyer pays the seller's GET /weather (0.01 USDC.e) and prints the body, the decoded X-PAYMENT-RESPONSE and the settled receipt", async () => {
    const info = stack.networks["cronos-testnet"]!;
    // The examples' defaults: payTo Hardhat #1 (the stack's seller) and buyer key Hardhat #2 (its first buyer).
    expect(stack.seller).to.equal("0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
    const buyer = info.buyers[0]!;
    expect(buyer.address).to.equal("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC");
    const before = await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller]);

    seller = spawnInRoot("tsx", ["scripts/example-seller.ts"], { SELLER_PORT: "0", FACILITATOR_URL: stack.facilitatorUrl, PAY_TO: "" }); // "" = unset: the default
    const [, sellerUrl] = await seller.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)\n[\s\S]*\n {2}facilitator \S+\n/, 60_000);
    expect(seller.stdout()).to.contain("GET /weather costs 0.01 USDC.e (10000 base units) on cronos-testnet, paid to 0x70997970C51812dc3A010C7d01b50e0d17dc79C8");

    buyerProc = spawnInRoot("tsx", ["scripts/example-buyer.ts"], { SELLER_URL: `${sellerUrl}/weather`, RPC_URL: info.rpcUrl, BUYER_PRIVATE_KEY: "" });
    const code = await buyerProc.exited;
    const out = buyerProc.stdout();
    expect(code, `${out}\n${buyerProc.stderr()}`).to.equal(0);

    expect(out).to.contain(`GET ${sellerUrl}/weather`);
    expect(out).to.contain("\n200 OK\n");
    const body = JSON.parse(out.match(/^body: (\{[\s\S]*?\n\})$/m)![1]!) as { payment: { txHash: Hex; blockNumber: number } };
    const settlement = JSON.parse(out.match(/^X-PAYMENT-RESPONSE \(decoded\): (\{[\s\S]*?\n\})$/m)![1]!) as Record<string, unknown>;
    const { payment } = body;
    expect(body).to.deep.equal({ location: "Cronos City", temperatureC: 21, conditions: "sunny", windKph: 9, payment });
    expect(settlement).to.deep.equal({ x402Version: 1, event: "payment.settled", network: "cronos-testnet", ...payment });
    expect(payment).to.deep.include({ from: buyer.address, to: stack.seller, value: "10000" });

    const authorizationLine = out.match(/event AuthorizationUsed {2}authorizer (0x[0-9a-fA-F]{40}) {2}nonce (0x[0-9a-f]{64})/);
    expect(authorizationLine, out).to.not.equal(null);
    const onChain = await expectSettlementOnChain(stack, "cronos-testnet", payment.txHash, {
      from: buyer.address,
      to: stack.seller,
      value: 10_000n,
      nonce: authorizationLine![2] as Hex,
    });
    expect(payment.blockNumber).to.equal(Number(onChain.receipt.blockNumber));
    expect(out).to.contain(`  transaction  ${payment.txHash}\n  status       success\n  block        ${payment.blockNumber}\n  gas used     ${onChain.receipt.gasUsed} `);
    expect(out).to.contain(`event Transfer           from ${buyer.address}  to ${stack.seller}  value 10000 (0.01 USDC.e)`);
    expect(out).to.contain(`paid 0.01 USDC.e to ${stack.seller} in block ${payment.blockNumber}`);
    expect(await tokenBalances(info.rpcUrl, info.token, [buyer.address, stack.seller])).to.deep.equal([before[0]! - 10_000n, before[1]! + 10_000n]);

    // The seller logged the payment, and stops on SIGTERM.
    expect(seller.stdout()).to.contain(`paid (cronos): 10000 base units from ${buyer.address}, tx ${payment.txHash}`);
    seller.child.kill("SIGTERM");
    expect(await seller.exited).to.equal(0);
  });
});
