import { expect } from "chai";
import { parseEventLogs, type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, createV2PaymentPayload } from "../../src/buyer/index.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { BALANCE_SINK } from "../../src/harness/control/chain-actions.js";
import { HarnessControlError, MAX_ENDED_FAULTS, MAX_FAULTS, type FaultInfo, type FaultSpec } from "../../src/harness/control/spec.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { encodeBase64Json } from "../../src/protocol/header.js";
import type { NetworkName } from "../../src/protocol/networks.js";
import { v2RequirementsOf } from "../../src/protocol/x402v2.js";
import { paymentRequirements } from "../../src/seller/index.js";
import { chainTime, rpcClient, tokenBalance } from "../helpers/chain.js";
import { occupyPort, postJson } from "../helpers/http.js";
import { rpc } from "../helpers/rpc.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";
import { waitUntil, WAIT_MS } from "../helpers/wait.js";
import { rejection } from "../helpers/reject.js";

// The harness's fault and time API in the stack's own process (stack.harness): each control makes the
// real cause happen (a transaction of the token's roles or of the payer, EDR's mining and clock, the
// facilitator's links to its chains, its quota, its listener), and each handle undoes it.

const PRICE = 10_000n;

/** The harness's refusal of `work`: its status and message. */
async function refusal(work: Promise<unknown>): Promise<{ status: number; message: string }> {
  const { status, message } = await rejection(work, HarnessControlError, "a harness call expected to be refused");
  return { status, message };
}

describe("harness faults: each makes the real cause happen on the local chains or in the facilitator, and its handle undoes it", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  const networks: NetworkName[] = ["cronos-testnet", "cronos-mainnet"];
  const info = (network: NetworkName = "cronos-testnet") => stack.networks[network]!;
  const buyer = (index = 0, network: NetworkName = "cronos-testnet") => privateKeyToAccount(info(network).buyers[index]!.privateKey);
  const balance = (address: Address, network: NetworkName = "cronos-testnet") => tokenBalance(info(network).rpcUrl, info(network).token, address);
  const read = <T>(network: NetworkName, functionName: "paused" | "isBlacklisted" | "authorizationState", args: readonly unknown[] = []) =>
    rpcClient(info(network).rpcUrl).readContract({ address: info(network).token, abi: tokenAbi, functionName, args } as never) as Promise<T>;
  const requirements = (network: NetworkName = "cronos-testnet") => paymentRequirements({ network, payTo: stack.seller, amount: PRICE });
  /** A signed payment of `index`'s buyer, as the verify and settle body. */
  async function payment(index = 0, network: NetworkName = "cronos-testnet") {
    const paymentRequirements = requirements(network);
    const paymentHeader = await createPaymentHeader({ signer: buyer(index, network), requirements: paymentRequirements });
    return { paymentHeader, body: { x402Version: 1, paymentHeader, paymentRequirements } };
  }
  const verify = (body: unknown) => postJson(`${stack.facilitatorUrl}/v2/x402/verify`, body);
  const settle = (body: unknown) => postJson(`${stack.facilitatorUrl}/v2/x402/settle`, body);

  before(async () => {
    // RPC_TIMEOUT_MS short: a dropped answer is given up on within a second; a settle gives up waiting after 3 s.
    stack = await startTestStack({ ...STACK_OPTIONS, env: { RPC_TIMEOUT_MS: "1000", SETTLE_TIMEOUT_SECONDS: "3" } });
  });
  after(() => stack?.stop());
  afterEach(async () => {
    await stack.harness.reset();
  });

  describe("payer state", () => {
    it("balance: the payer's USDC.e goes to a sink address in a real Transfer (both networks when none is named); undo mints it back", async () => {
      const payer = buyer(0).address;
      const before = await Promise.all(networks.map((network) => balance(payer, network)));
      const sinkBefore = await balance(BALANCE_SINK);
      const fault = await stack.harness.fault({ kind: "balance", address: payer, amount: 1_000_000n });
      expect(fault.info).to.deep.include({ kind: "balance", state: "active", description: `USDC.e balance of ${payer} set to 1000000 base units` });
      expect(fault.info.spec).to.deep.equal({ kind: "balance", address: payer, amount: "1000000", trigger: "now" });
      expect(await Promise.all(networks.map((network) => balance(payer, network)))).to.deep.equal([1_000_000n, 1_000_000n]);
      expect(await balance(BALANCE_SINK)).to.equal(sinkBefore + before[0]! - 1_000_000n);
      // The latest block's transaction is the payer's own transfer.
      const block = await rpcClient(info().rpcUrl).getBlock({ blockTag: "latest", includeTransactions: true });
      const receipt = await rpcClient(info().rpcUrl).getTransactionReceipt({ hash: block.transactions[0]!.hash });
      expect(receipt.from.toLowerCase()).to.equal(payer.toLowerCase());
      expect(parseEventLogs({ abi: tokenAbi, eventName: "Transfer", logs: receipt.logs }).map((log) => log.args)).to.deep.equal([{ from: payer, to: BALANCE_SINK, value: before[0]! - 1_000_000n }]);

      const undone = await fault.undo();
      expect(undone.state).to.equal("ended");
      expect(await Promise.all(networks.map((network) => balance(payer, network)))).to.deep.equal(before);
      // Undoing again is a no-op with the same report.
      expect((await fault.undo()).state).to.equal("ended");
      expect(await Promise.all(networks.map((network) => balance(payer, network)))).to.deep.equal(before);
    });

    it("balance on one network raises it by minting (as the master minter), the other network untouched", async () => {
      const payer = buyer(1).address;
      const [testnet, mainnet] = await Promise.all(networks.map((network) => balance(payer, network)));
      const fault = await stack.harness.fault({ kind: "balance", address: payer, amount: "5000000000", network: "cronos-mainnet" });
      expect(await balance(payer, "cronos-mainnet")).to.equal(5_000_000_000n);
      expect(await balance(payer, "cronos-testnet")).to.equal(testnet);
      await fault.undo();
      expect(await balance(payer, "cronos-mainnet")).to.equal(mainnet);
    });

    it("pause: USDC.e's pauser pauses it on every network; undo unpauses; a second pause over the first leaves it paused until the first is undone", async () => {
      const first = await stack.harness.fault({ kind: "pause" });
      expect(await Promise.all(networks.map((network) => read<boolean>(network, "paused")))).to.deep.equal([true, true]);
      const second = await stack.harness.fault({ kind: "pause", network: "testnet" });
      await second.undo();
      expect(await read<boolean>("cronos-testnet", "paused")).to.equal(true);
      await first.undo();
      expect(await Promise.all(networks.map((network) => read<boolean>(network, "paused")))).to.deep.equal([false, false]);
    });

    it("blacklist: USDC.e's blacklister blacklists the address; undo takes it off", async () => {
      const payer = buyer(0).address;
      const fault = await stack.harness.fault({ kind: "blacklist", address: payer, network: "cronos-testnet" });
      expect(await read<boolean>("cronos-testnet", "isBlacklisted", [payer])).to.equal(true);
      expect(await read<boolean>("cronos-mainnet", "isBlacklisted", [payer])).to.equal(false);
      // A balance fault on a blacklisted payer is refused with the token's reason, and changes nothing.
      const before = await balance(payer);
      expect(await refusal(stack.harness.fault({ kind: "balance", address: payer, amount: 0, network: "cronos-testnet" }))).to.deep.equal({
        status: 409,
        message: `cronos-testnet: transfer as ${payer} failed: Blacklistable: account is blacklisted`,
      });
      expect(await balance(payer)).to.equal(before);
      await fault.undo();
      expect(await read<boolean>("cronos-testnet", "isBlacklisted", [payer])).to.equal(false);
    });
  });

  describe("a payer's authorization spent under the seller", () => {
    it("use: the X-PAYMENT's authorization is submitted on chain by someone else (the payee is paid); the fault has ended at once and its undo changes nothing", async () => {
      const { paymentHeader, body } = await payment(0);
      const parties = [buyer(0).address, stack.seller];
      const before = await Promise.all(parties.map((party) => balance(party)));
      const fault = await stack.harness.fault({ kind: "authorization", action: "use", payment: paymentHeader });
      expect(fault.info.state).to.equal("ended");
      const receipt = await rpcClient(info().rpcUrl).getTransactionReceipt({ hash: fault.info.txHash as Hex });
      expect(receipt.status).to.equal("success");
      expect(receipt.from.toLowerCase()).not.to.equal(stack.relayer.toLowerCase());
      expect(parseEventLogs({ abi: tokenAbi, logs: receipt.logs }).map((log) => log.eventName)).to.deep.equal(["AuthorizationUsed", "Transfer"]);
      expect(await Promise.all(parties.map((party) => balance(party)))).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
      expect((await fault.undo()).state).to.equal("ended");
      expect(await Promise.all(parties.map((party) => balance(party)))).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
      // The facilitator meets the spent nonce.
      expect((await verify(body)).json).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });
      // Spending it again is refused with the token's reason.
      expect(await refusal(stack.harness.fault({ kind: "authorization", action: "cancel", payment: paymentHeader }))).to.deep.equal({
        status: 409,
        message: `cronos-testnet: cancelAuthorization of ${buyer(0).address}'s nonce ${JSON.parse(Buffer.from(paymentHeader, "base64").toString()).payload.nonce} failed: FiatTokenV2: authorization is used or canceled`,
      });
    });

    it("cancel: the payer (one of the stack's buyers) cancels a PAYMENT-SIGNATURE's nonce: AuthorizationCanceled, nobody paid", async () => {
      const v2 = v2RequirementsOf(requirements("cronos-mainnet"))!;
      const signed = await createV2PaymentPayload({ signer: buyer(1, "cronos-mainnet"), requirements: v2 });
      const before = await balance(stack.seller, "cronos-mainnet");
      const fault = await stack.harness.fault({ kind: "authorization", action: "cancel", payment: encodeBase64Json(signed) });
      const receipt = await rpcClient(info("cronos-mainnet").rpcUrl).getTransactionReceipt({ hash: fault.info.txHash as Hex });
      expect(parseEventLogs({ abi: tokenAbi, logs: receipt.logs }).map((log) => [log.eventName, log.args])).to.deep.equal([
        ["AuthorizationCanceled", { authorizer: buyer(1, "cronos-mainnet").address, nonce: signed.payload.authorization.nonce }],
      ]);
      expect(await read<boolean>("cronos-mainnet", "authorizationState", [buyer(1, "cronos-mainnet").address, signed.payload.authorization.nonce])).to.equal(true);
      expect(await balance(stack.seller, "cronos-mainnet")).to.equal(before);
    });

    it("cancel needs the payer's key: a payer outside the stack's accounts is refused (400) unless its key is given; the key is never reported", async () => {
      const key = generatePrivateKey();
      const stranger = privateKeyToAccount(key);
      const paymentHeader = await createPaymentHeader({ signer: stranger, requirements: requirements() });
      expect(await refusal(stack.harness.fault({ kind: "authorization", action: "cancel", payment: paymentHeader }))).to.deep.equal({
        status: 400,
        message: `cancel needs the payer's key: ${stranger.address} is not one of the stack's accounts; pass privateKey, or use action "use"`,
      });
      const wrongKey = info().buyers[0]!.privateKey;
      expect(await refusal(stack.harness.fault({ kind: "authorization", action: "cancel", payment: paymentHeader, privateKey: wrongKey }))).to.deep.equal({
        status: 400,
        message: `privateKey: not the key of the payer ${stranger.address}`,
      });
      const fault = await stack.harness.fault({ kind: "authorization", action: "cancel", payment: paymentHeader, privateKey: key });
      expect(fault.info.state).to.equal("ended");
      expect(JSON.stringify(fault.info)).not.to.contain(key.slice(2));
      expect(JSON.stringify(await stack.harness.faults())).not.to.contain(key.slice(2));
    });

    it("a forged authorization (the buyer's address, another key's signature) is refused 409 with the token's reason: nothing moves, the nonce stays unspent", async () => {
      const forger = privateKeyToAccount(generatePrivateKey());
      const signed = JSON.parse(Buffer.from(await createPaymentHeader({ signer: forger, requirements: requirements() }), "base64").toString());
      signed.payload.from = buyer(0).address;
      const parties = [buyer(0).address, stack.seller];
      const before = await Promise.all(parties.map((party) => balance(party)));
      expect(await refusal(stack.harness.fault({ kind: "authorization", action: "use", payment: encodeBase64Json(signed) }))).to.deep.equal({
        status: 409,
        message: `cronos-testnet: transferWithAuthorization of ${buyer(0).address}'s nonce ${signed.payload.nonce} failed: FiatTokenV2: invalid signature`,
      });
      expect(await Promise.all(parties.map((party) => balance(party)))).to.deep.equal(before);
      expect(await read<boolean>("cronos-testnet", "authorizationState", [buyer(0).address, signed.payload.nonce])).to.equal(false);
      expect((await stack.harness.faults()).filter((fault) => fault.state === "armed" || fault.state === "active")).to.deep.equal([]);
    });

    it("refuses a payment that is not one (400) and a network that contradicts it, spending nothing", async () => {
      expect(await refusal(stack.harness.fault({ kind: "authorization", action: "use", payment: "bm90IGEgcGF5bWVudA==" }))).to.deep.equal({
        status: 400,
        message: "payment: neither an X-PAYMENT value (base64 JSON, x402Version 1) nor a PAYMENT-SIGNATURE value (x402Version 2) with an EIP-3009 authorization",
      });
      const { paymentHeader } = await payment(2);
      expect(await refusal(stack.harness.fault({ kind: "authorization", action: "use", payment: paymentHeader, network: "cronos-mainnet" }))).to.deep.equal({
        status: 400,
        message: "network: the payment is for cronos-testnet, not cronos-mainnet",
      });
      const nonce = JSON.parse(Buffer.from(paymentHeader, "base64").toString()).payload.nonce as Hex;
      expect(await read<boolean>("cronos-testnet", "authorizationState", [buyer(2).address, nonce])).to.equal(false);
    });
  });

  describe("time and blocks", () => {
    it("advanceTime moves every chain's clock forward and mines a block carrying it (or one network's only)", async () => {
      const before = await Promise.all(networks.map((network) => chainTime(info(network).rpcUrl)));
      const times = await stack.harness.advanceTime(120);
      const after = await Promise.all(networks.map((network) => chainTime(info(network).rpcUrl)));
      expect(times).to.deep.equal({ "cronos-testnet": Number(after[0]), "cronos-mainnet": Number(after[1]) });
      for (const [i, time] of after.entries()) expect(Number(time - before[i]!)).to.be.at.least(120);
      const one = await stack.harness.advanceTime(60, { network: "cronos-mainnet" });
      expect(Object.keys(one)).to.deep.equal(["cronos-mainnet"]);
      expect(Number(await chainTime(info("cronos-testnet").rpcUrl))).to.be.lessThan(one["cronos-mainnet"]!);
    });

    it("a time fault (kind time) is the same move, reported as ended at once: a chain's clock does not go back", async () => {
      const fault = await stack.harness.fault({ kind: "time", seconds: 30, network: "cronos-testnet" });
      expect(fault.info.state).to.equal("ended");
      expect(fault.info.chainTime).to.deep.equal({ "cronos-testnet": Number(await chainTime(info().rpcUrl)) });
    });

    it("stopBlocks: a transaction waits in the pool (no receipt, no new block), chain faults are refused meanwhile; undo mines it and automine resumes", async () => {
      const client = rpcClient(info().rpcUrl);
      const fault = await stack.harness.stopBlocks({ network: "cronos-testnet" });
      const height = await client.getBlockNumber({ cacheTime: 0 });
      const hash = await rpc<Hex>(info().rpcUrl, "eth_sendTransaction", [{ from: buyer(0).address, to: buyer(1).address, value: "0x1" }]);
      expect((await stack.harness.status()).networks["cronos-testnet"]!.blocks).to.equal("stopped");
      expect((await stack.harness.status()).networks["cronos-mainnet"]!.blocks).to.equal("running");
      expect(await refusal(stack.harness.fault({ kind: "pause", network: "cronos-testnet" }))).to.deep.equal({
        status: 409,
        message: `blocks are stopped on cronos-testnet (fault ${fault.id}): a transaction would not be mined; resume them first`,
      });
      // After those later answers of the harness, still no receipt and no new block.
      expect(await rpc(info().rpcUrl, "eth_getTransactionReceipt", [hash])).to.equal(null);
      expect(Number(await client.getBlockNumber({ cacheTime: 0 }))).to.equal(Number(height));
      // The clock moves without a block: the next one carries it.
      const moved = await stack.harness.advanceTime(10, { network: "cronos-testnet" });
      expect(Number(await client.getBlockNumber({ cacheTime: 0 }))).to.equal(Number(height));

      await fault.undo();
      const receipt = await client.getTransactionReceipt({ hash });
      expect(receipt.blockNumber).to.equal(height + 1n);
      expect(Number((await client.getBlock({ blockNumber: receipt.blockNumber })).timestamp)).to.be.at.least(moved["cronos-testnet"]!);
      // Automine again: the next transaction is mined at once.
      const next = await rpc<Hex>(info().rpcUrl, "eth_sendTransaction", [{ from: buyer(0).address, to: buyer(1).address, value: "0x1" }]);
      expect(await rpc(info().rpcUrl, "eth_getTransactionReceipt", [next])).not.to.equal(null);
    });

    it("stopBlocks forSeconds resumes by itself; resumeBlocks resumes at once", async () => {
      const timed = await stack.harness.stopBlocks({ forSeconds: 1 });
      expect(timed.info.endsAt).to.be.a("string");
      expect(await waitUntil(async () => (await stack.harness.status()).networks["cronos-testnet"]!.blocks === "running", 5_000)).to.equal(true);
      expect((await stack.harness.faults()).find((fault) => fault.id === timed.id)?.state).to.equal("ended");
      await stack.harness.stopBlocks();
      expect(await stack.harness.resumeBlocks()).to.equal(1);
      expect(Object.values((await stack.harness.status()).networks).map((chain) => chain!.blocks)).to.deep.equal(["running", "running"]);
    });
  });

  describe("the facilitator's RPC (its links to the chains, not the public JSON-RPC)", () => {
    it("refuse: verify answers 500 Service unavailable, while the chain's own JSON-RPC still answers; undo restores verify", async () => {
      const { body } = await payment(0);
      const fault = await stack.harness.fault({ kind: "rpc", mode: "refuse", network: "cronos-testnet" });
      const refused = await verify(body);
      expect(refused.status).to.equal(500);
      expect(refused.json.invalidReason).to.match(/^Service unavailable: /);
      expect(await chainTime(info().rpcUrl)).to.be.a("bigint");
      await fault.undo();
      expect((await verify(body)).json).to.deep.equal({ isValid: true, invalidReason: null });
    });

    it("methods: refusing only eth_sendRawTransaction lets verify pass; settle's broadcast never reaches the node, it answers Transaction failed on-chain with the hash at SETTLE_TIMEOUT_SECONDS, and once undone the ledger's transaction is broadcast and pays", async () => {
      const { body } = await payment(0);
      const parties = [buyer(0).address, stack.seller];
      const before = await Promise.all(parties.map((party) => balance(party)));
      const fault = await stack.harness.fault({ kind: "rpc", mode: "refuse", methods: ["eth_sendRawTransaction"] });
      expect((await verify(body)).json).to.deep.equal({ isValid: true, invalidReason: null });
      const settled = await settle(body);
      expect(settled.json).to.deep.include({ event: "payment.failed", error: "Transaction failed on-chain" });
      const txHash = settled.json.txHash as Hex;
      expect(txHash).to.match(/^0x[0-9a-f]{64}$/);
      expect(await rpc(info().rpcUrl, "eth_getTransactionByHash", [txHash])).to.equal(null);
      expect(await Promise.all(parties.map((party) => balance(party)))).to.deep.equal(before);

      await fault.undo();
      // The reconciler broadcasts the recorded transaction again: the payment is made, once.
      expect(await waitUntil(async () => (await rpc(info().rpcUrl, "eth_getTransactionReceipt", [txHash])) !== null, 30_000, 200)).to.equal(true);
      expect(await Promise.all(parties.map((party) => balance(party)))).to.deep.equal([before[0]! - PRICE, before[1]! + PRICE]);
    });

    it("forCalls: the fault takes that many calls (callsLeft counts down), then ends by itself", async () => {
      const { body } = await payment(0);
      const fault = await stack.harness.fault({ kind: "rpc", mode: "refuse", forCalls: 2 });
      expect((await stack.harness.faults()).find((each) => each.id === fault.id)?.callsLeft).to.equal(2);
      // Whichever of the facilitator's calls come first take the two: verify's reads, or the token state index's
      // own head polls running beside it (verify then answers from the index's memory). Verify until it is used up.
      const answers: Array<{ status: number; json: Record<string, unknown> }> = [];
      await waitUntil("the fault used up", async () => {
        answers.push(await verify(body));
        return (await stack.harness.faults()).find((each) => each.id === fault.id)?.state === "ended";
      }, WAIT_MS, 50);
      // Each refused verify took at least one of the two calls: at most two of them; every other answer valid.
      const refused = answers.filter((answer) => answer.status !== 200);
      expect(refused.length, JSON.stringify(answers)).to.be.at.most(2);
      expect(refused.map((answer) => [answer.status, String(answer.json.invalidReason).startsWith("Service unavailable: ")])).to.deep.equal(refused.map(() => [500, true]));
      expect(answers.filter((answer) => answer.status === 200)).to.deep.equal(Array(answers.length - refused.length).fill({ status: 200, json: { isValid: true, invalidReason: null } }));
      expect((await verify(body)).json).to.deep.equal({ isValid: true, invalidReason: null });
    });

    it("delay: each call is held delayMs before it reaches the chain (verify still answers, later)", async () => {
      const { body } = await payment(0);
      const fault = await stack.harness.fault({ kind: "rpc", mode: "delay", delayMs: 200, forCalls: 1_000 });
      expect((await verify(body)).json).to.deep.equal({ isValid: true, invalidReason: null });
      // Calls went through the fault (each held delayMs: how long verify then takes is bench:faults' figure).
      expect((await stack.harness.faults()).find((each) => each.id === fault.id)?.callsLeft).to.be.below(1_000);
    });

    it("drop: the call reaches the chain but its answer never comes back; the facilitator gives up at RPC_TIMEOUT_MS", async () => {
      const { body } = await payment(0);
      await stack.harness.fault({ kind: "rpc", mode: "drop", forSeconds: 30 });
      const dropped = await verify(body);
      expect(dropped.status).to.equal(500);
      expect(dropped.json.invalidReason).to.match(/^Service unavailable: /);
    });
  });

  describe("the facilitator itself", () => {
    it("busy: verify, settle and the status lookup answer 429 with Retry-After (the seconds left), the healthcheck still 200; undo lifts it", async () => {
      const { body } = await payment(0);
      const fault = await stack.harness.fault({ kind: "busy", forSeconds: 30 });
      for (const path of ["/v2/x402/verify", "/v2/x402/settle"]) {
        const response = await fetch(`${stack.facilitatorUrl}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
        expect(response.status).to.equal(429);
        const retryAfter = Number(response.headers.get("retry-after"));
        expect(retryAfter).to.be.within(29, 30);
        expect(await response.json()).to.deep.equal({ error: "Too many requests", retryAfter });
      }
      expect((await fetch(`${stack.facilitatorUrl}/v2/x402/settlements?network=cronos-testnet&from=${buyer(0).address}&nonce=0x${"0".repeat(64)}`)).status).to.equal(429);
      expect((await fetch(`${stack.facilitatorUrl}/healthcheck`)).status).to.equal(200);
      await fault.undo();
      expect((await verify(body)).json).to.deep.equal({ isValid: true, invalidReason: null });
    });

    it("facilitator-down closes its port; restart is refused meanwhile; undo starts a new one on the same URL", async () => {
      const before = stack.facilitator;
      const fault = await stack.harness.fault({ kind: "facilitator-down" });
      expect(await fetch(`${stack.facilitatorUrl}/v2/x402/supported`).then(() => "answered", (error: { cause?: { code?: string } }) => error.cause?.code)).to.equal("ECONNREFUSED");
      expect((await stack.harness.status()).facilitator).to.deep.equal({ url: stack.facilitatorUrl, running: false });
      expect(await refusal(stack.harness.restartFacilitator())).to.deep.equal({ status: 409, message: `the facilitator is stopped (fault ${fault.id}): undo that fault to start it` });
      await fault.undo();
      expect((await fetch(`${stack.facilitatorUrl}/v2/x402/supported`)).status).to.equal(200);
      expect(stack.facilitator).not.to.equal(before);
      expect(stack.facilitator.url).to.equal(stack.facilitatorUrl);
    });

    it("a facilitator whose port was taken while it was down: the undo fails (409, the fault reported failed, the port named), restartFacilitator starts it once the port is free", async () => {
      const port = Number(new URL(stack.facilitatorUrl).port);
      const fault = await stack.harness.fault({ kind: "facilitator-down" });
      const squatter = await occupyPort(port);
      let released = false;
      try {
        const failed = `the facilitator did not start again: PORT: 127.0.0.1:${port} is already in use; choose another port (PORT=… or --port …); restartFacilitator() (POST /harness/facilitator/restart) tries again`;
        expect(await refusal(fault.undo())).to.deep.equal({ status: 409, message: failed });
        expect(await stack.harness.undo(fault.id)).to.deep.include({ state: "failed", error: `undo failed: ${failed}` });
        expect((await stack.harness.status()).facilitator).to.deep.equal({ url: stack.facilitatorUrl, running: false });
        expect(await refusal(stack.harness.restartFacilitator())).to.deep.equal({ status: 409, message: failed });
        await squatter.release();
        released = true;
        await stack.harness.restartFacilitator();
        expect((await stack.harness.status()).facilitator).to.deep.equal({ url: stack.facilitatorUrl, running: true });
        expect((await fetch(`${stack.facilitatorUrl}/v2/x402/supported`)).status).to.equal(200);
      } finally {
        if (!released) await squatter.release();
      }
    });

    it("restartFacilitator: a new instance on the same URL, over the same ledger (a settlement of the last one is found by the new one)", async () => {
      const { body, paymentHeader } = await payment(1);
      const settled = await settle(body);
      expect(settled.json.event).to.equal("payment.settled");
      const before = stack.facilitator;
      await stack.harness.restartFacilitator();
      expect(stack.facilitator).not.to.equal(before);
      const nonce = JSON.parse(Buffer.from(paymentHeader, "base64").toString()).payload.nonce as Hex;
      const lookup = await fetch(`${stack.facilitatorUrl}/v2/x402/settlements?network=cronos-testnet&from=${buyer(1).address}&nonce=${nonce}`);
      expect(await lookup.json()).to.deep.include({ status: "settled", txHash: settled.json.txHash });
    });
  });

  describe("after-verify faults", () => {
    it("an armed fault waits: an invalid verify and another payer's valid verify leave it armed; the payer's valid verify fires it before the answer", async () => {
      const payer = buyer(0).address;
      const before = await balance(payer);
      const fault = await stack.harness.fault({ kind: "balance", address: payer, amount: 0, trigger: "after-verify", network: "cronos-testnet" });
      expect(fault.info.state).to.equal("armed");
      expect(fault.info.description).to.equal(`USDC.e balance of ${payer} set to 0 base units on cronos-testnet, after the next valid verify of ${payer}`);
      const { body: other } = await payment(1);
      expect((await verify(other)).json.isValid).to.equal(true);
      const { body } = await payment(0);
      const wrongPrice = { ...body, paymentRequirements: { ...body.paymentRequirements, maxAmountRequired: "20000" } };
      expect((await verify(wrongPrice)).json.isValid).to.equal(false);
      expect(await balance(payer)).to.equal(before);
      expect((await stack.harness.faults()).find((each) => each.id === fault.id)?.state).to.equal("armed");

      // Valid when verified; the balance gone once answered: settle meets it.
      expect((await verify(body)).json).to.deep.equal({ isValid: true, invalidReason: null });
      expect(await balance(payer)).to.equal(0n);
      expect((await stack.harness.faults()).find((each) => each.id === fault.id)?.state).to.equal("active");
      const settled = await settle(body);
      expect(settled.json).to.deep.include({ event: "payment.failed", error: "ERC20: transfer amount exceeds balance" });
      await fault.undo();
      expect(await balance(payer)).to.equal(before);
    });

    it("undoing an armed fault disarms it: nothing happens at the next verify", async () => {
      const fault = await stack.harness.fault({ kind: "pause", trigger: "after-verify" });
      expect((await fault.undo()).state).to.equal("ended");
      const { body } = await payment(0);
      expect((await verify(body)).json.isValid).to.equal(true);
      expect(await read<boolean>("cronos-testnet", "paused")).to.equal(false);
    });

    it("an armed authorization fault spends the nonce of the very payment verified", async () => {
      const fault = await stack.harness.fault({ kind: "authorization", action: "cancel", trigger: "after-verify", payer: buyer(2).address });
      const { body, paymentHeader } = await payment(2);
      expect((await verify(body)).json.isValid).to.equal(true);
      const nonce = JSON.parse(Buffer.from(paymentHeader, "base64").toString()).payload.nonce as Hex;
      expect(await read<boolean>("cronos-testnet", "authorizationState", [buyer(2).address, nonce])).to.equal(true);
      const report = (await stack.harness.faults()).find((each) => each.id === fault.id)!;
      expect(report.state).to.equal("ended");
      expect(report.txHash).to.match(/^0x[0-9a-f]{64}$/);
      expect((await settle(body)).json).to.deep.include({ event: "payment.failed", error: "Authorization already used" });
    });

    it("a fault that cannot take effect when it fires is reported failed with the reason, and the verify answer stands", async () => {
      const payer = buyer(0).address;
      await stack.harness.fault({ kind: "blacklist", address: payer, network: "cronos-testnet" });
      const fault = await stack.harness.fault({ kind: "balance", address: payer, amount: 0, trigger: "after-verify", network: "cronos-testnet" });
      const { body } = await payment(0);
      expect((await verify(body)).json).to.deep.equal({ isValid: true, invalidReason: null });
      const report = (await stack.harness.faults()).find((each) => each.id === fault.id)!;
      expect(report).to.deep.include({ state: "failed", error: `cronos-testnet: transfer as ${payer} failed: Blacklistable: account is blacklisted` });
    });
  });

  describe("bounds and checks", () => {
    it(`holds at most ${MAX_FAULTS} faults armed or in force (the next is refused 409), and remembers the last ${MAX_ENDED_FAULTS} ended ones`, async () => {
      const made = await Promise.all(Array.from({ length: MAX_FAULTS }, () => stack.harness.fault({ kind: "pause", trigger: "after-verify" })));
      expect(new Set(made.map((fault) => fault.id)).size).to.equal(MAX_FAULTS);
      expect(await refusal(stack.harness.fault({ kind: "busy", forSeconds: 1 }))).to.deep.equal({
        status: 409,
        message: `${MAX_FAULTS} faults are armed or in force already: undo some first (DELETE /harness/faults undoes them all)`,
      });
      expect(await stack.harness.reset()).to.equal(MAX_FAULTS);
      await Promise.all(Array.from({ length: 20 }, () => stack.harness.fault({ kind: "busy", forSeconds: 1 }).then((fault) => fault.undo())));
      const all = await stack.harness.faults();
      expect(all).to.have.length(MAX_ENDED_FAULTS);
      expect(all.every((fault: FaultInfo) => fault.state === "ended")).to.equal(true);
      // Reset undid the newest first: the first of the hundred is the oldest report, pushed out by the twenty since.
      const oldest = made.at(-1)!.id;
      expect((await refusal(stack.harness.undo(oldest))).message).to.equal(`no fault "${oldest}" (armed, in force or recently ended)`);
    });

    it("refuses a malformed spec with one line naming the field, doing nothing", async () => {
      const cases: Array<[unknown, string]> = [
        [{ kind: "meteor" }, "kind must be one of balance, pause, blacklist, authorization, time, rpc, busy, blocks, facilitator-down, lagging-backend, mempool-lost, min-fee, no-replacement"],
        [{ kind: "balance", address: "0x12", amount: 1 }, "address must be a 0x address of 40 hex digits"],
        [{ kind: "balance", address: buyer(0).address, amount: -1 }, "amount must be a whole number of base units (1 USDC.e = 1000000), as a string"],
        [{ kind: "rpc", mode: "refuse", delayMs: 5 }, 'delayMs delayMs goes with mode "delay", and only with it'],
        [{ kind: "rpc", mode: "delay" }, 'delayMs delayMs goes with mode "delay", and only with it'],
        [{ kind: "busy", forSeconds: 0 }, "forSeconds must be from 1 to 3600"],
        [{ kind: "busy" }, "forSeconds must be a whole number of seconds from 1 to 3600"],
        [{ kind: "authorization", action: "use" }, 'payment needs `payment` (the X-PAYMENT or PAYMENT-SIGNATURE value), or trigger "after-verify"'],
        [{ kind: "pause", network: "ethereum" }, 'network unknown network "ethereum" (cronos-testnet, cronos-mainnet)'],
        [{ kind: "pause", extra: true }, 'Unrecognized key: "extra"'],
        [{ kind: "facilitator-down", trigger: "after-verify" }, 'Unrecognized key: "trigger"'],
      ];
      const before = await stack.harness.faults();
      for (const [spec, message] of cases) expect(await refusal(stack.harness.fault(spec as FaultSpec)), JSON.stringify(spec)).to.deep.equal({ status: 400, message });
      expect(await stack.harness.faults()).to.deep.equal(before);
    });
  });
});

describe("harness faults: a stack of one network, and what its stop undoes", function () {
  this.timeout(120_000);

  it("busy holds behind the facilitator's rate-limit guards as on its fast lane (the stacks above have no limit): verify and settle 429 with Retry-After, then 400 for the same empty body once undone", async () => {
    const stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-testnet"], buyers: 0, rateLimits: { verifyPerMinute: 1_000, settlePerMinute: 1_000 } });
    try {
      const post = (route: string) => fetch(`${stack.facilitatorUrl}/v2/x402/${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      const busy = await stack.harness.fault({ kind: "busy", forSeconds: 30 });
      for (const route of ["verify", "settle"]) {
        const answer = await post(route);
        expect(answer.status, route).to.equal(429);
        expect(Number(answer.headers.get("retry-after")), route).to.be.within(29, 30);
      }
      await busy.undo();
      for (const route of ["verify", "settle"]) expect((await post(route)).status, route).to.equal(400);
    } finally {
      await stack.stop();
    }
  });

  it("refuses a network it does not run (400); stop() returns with blocks stopped, the RPC dropping, busy and the facilitator down", async () => {
    const stack = await startTestStack({ ...STACK_OPTIONS, networks: ["cronos-mainnet"] });
    try {
      expect(await refusal(stack.harness.fault({ kind: "pause", network: "cronos-testnet" }))).to.deep.equal({
        status: 400,
        message: "network: cronos-testnet is not running in this stack (cronos-mainnet)",
      });
      await stack.harness.stopBlocks();
      await stack.harness.fault({ kind: "rpc", mode: "drop" });
      await stack.harness.fault({ kind: "busy", forSeconds: 3600 });
      await stack.harness.fault({ kind: "facilitator-down" });
    } finally {
      await stack.stop();
    }
    expect(await refusal(stack.harness.fault({ kind: "pause" }))).to.deep.equal({ status: 409, message: "the stack is stopping: no more faults" });
    expect(await fetch(stack.harnessUrl).then(() => "answered", () => "refused")).to.equal("refused");
  });
});
