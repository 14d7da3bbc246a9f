import { expect } from "chai";
import { keccak256, toBytes, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader } from "../../src/buyer/index.js";
import { TX_HASH } from "../helpers/chain.js";
import { postJson } from "../helpers/http.js";
import { spawnInRoot, type Spawned } from "../helpers/processes.js";
import { balanceOfData, rpc } from "../helpers/rpc.js";
import { ISO_TIME } from "../helpers/time.js";

// test/harness/start.test.ts already checks the --json line's shape, that it serves what it names and
// that SIGTERM stops it cleanly. This file uses the line as a CI suite in another language would:
// read it, then pay with plain HTTP (fetch) and plain JSON-RPC (eth_call), nothing of the kit's
// clients but the header signer.

interface JsonLine {
  facilitatorUrl: string;
  relayer: Address;
  networks: Record<
    string,
    { chainId: number; rpcUrl: string; token: Address; domain: { name: string; version: string }; buyers: Array<{ address: Address; privateKey: Hex }> }
  >;
}

const TRANSFER_TOPIC = keccak256(toBytes("Transfer(address,address,uint256)"));
const AUTHORIZATION_USED_TOPIC = keccak256(toBytes("AuthorizationUsed(address,bytes32)"));
/** Where the CI pays to: Hardhat account #1 (a PUBLIC key, LOCAL-ONLY), the kit's suggested seller. */
const PAY_TO: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8";

const topicOf = (address: string) => `0x${address.slice(2).toLowerCase().padStart(64, "0")}`;

describe("e2e: npm start --json from a child process, used as a CI suite would (node scripts/bootstrap.mjs start --json)", function () {
  this.timeout(120_000);
  let proc: Spawned;
  let line: JsonLine;
  let rawLine: string;

  before(async () => {
    proc = spawnInRoot("node", ["scripts/bootstrap.mjs", "start", "--json", "--port", "0", "--testnet-rpc-port", "0", "--mainnet-rpc-port", "0"]);
    rawLine = (await proc.waitFor(/^.*\n/, 90_000))[0];
    line = JSON.parse(rawLine) as JsonLine;
  });
  after(() => proc?.kill());

  for (const network of ["cronos-testnet", "cronos-mainnet"]) {
    it(`pays on ${network} with fetch against /v2/x402/verify and /v2/x402/settle, and reads the balances with eth_call`, async () => {
      const net = line.networks[network]!;
      const buyer = net.buyers[0]!;
      const balance = async (account: string) =>
        BigInt(await rpc<Hex>(net.rpcUrl, "eth_call", [{ to: net.token, data: balanceOfData(account) }, "latest"]));
      const requirements = {
        scheme: "exact",
        network,
        payTo: PAY_TO,
        asset: net.token,
        maxAmountRequired: "10000",
        description: "CI payment",
        mimeType: "application/json",
        maxTimeoutSeconds: 300,
      };
      // Signed for the chain id and domain the line names.
      const paymentHeader = await createPaymentHeader({ signer: privateKeyToAccount(buyer.privateKey), requirements, chainId: net.chainId, domain: net.domain });
      const body = { x402Version: 1, paymentHeader, paymentRequirements: requirements };
      const before = [await balance(buyer.address), await balance(PAY_TO)];

      const verify = await postJson(`${line.facilitatorUrl}/v2/x402/verify`, body);
      expect(verify).to.deep.equal({ status: 200, json: { isValid: true, invalidReason: null } });

      const settle = await postJson(`${line.facilitatorUrl}/v2/x402/settle`, body);
      expect(settle.status).to.equal(200);
      const { txHash, blockNumber, timestamp } = settle.json as { txHash: Hex; blockNumber: number; timestamp: string };
      expect(txHash).to.match(TX_HASH);
      expect(timestamp).to.match(ISO_TIME);
      expect(settle.json).to.deep.equal({
        x402Version: 1,
        event: "payment.settled",
        txHash,
        from: buyer.address,
        to: PAY_TO,
        value: "10000",
        blockNumber,
        network,
        timestamp,
      });

      const receipt = await rpc<{ status: Hex; blockNumber: Hex; from: string; to: string; logs: Array<{ address: string; topics: Hex[]; data: Hex }> }>(
        net.rpcUrl,
        "eth_getTransactionReceipt",
        [txHash],
      );
      expect(receipt.status).to.equal("0x1");
      expect(Number(receipt.blockNumber)).to.equal(blockNumber);
      expect(receipt.from).to.equal(line.relayer.toLowerCase());
      expect(receipt.to).to.equal(net.token.toLowerCase());
      const nonce = JSON.parse(Buffer.from(paymentHeader, "base64").toString("utf8")).payload.nonce as Hex;
      expect(receipt.logs.map((log) => ({ address: log.address.toLowerCase(), topics: log.topics, data: log.data }))).to.deep.equal([
        { address: net.token.toLowerCase(), topics: [AUTHORIZATION_USED_TOPIC, topicOf(buyer.address), nonce], data: "0x" },
        { address: net.token.toLowerCase(), topics: [TRANSFER_TOPIC, topicOf(buyer.address), topicOf(PAY_TO)], data: `0x${(10000).toString(16).padStart(64, "0")}` },
      ]);
      const block = await rpc<{ timestamp: Hex }>(net.rpcUrl, "eth_getBlockByNumber", [receipt.blockNumber, false]);
      expect(new Date(Number(block.timestamp) * 1000).toISOString()).to.equal(timestamp);

      expect([await balance(buyer.address), await balance(PAY_TO)]).to.deep.equal([before[0]! - 10_000n, before[1]! + 10_000n]);
    });
  }

  it("stops on SIGTERM with exit code 0, having printed nothing but the line on stdout", async () => {
    proc.child.kill("SIGTERM");
    expect(await proc.exited).to.equal(0);
    expect(proc.stdout()).to.equal(rawLine);
  });
});
