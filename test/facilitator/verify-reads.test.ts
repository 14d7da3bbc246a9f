import { expect } from "chai";
import request from "supertest";
import { numberToHex, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { encodePaymentHeader } from "../../src/protocol/header.js";
import { transferAuthorizationTypedData } from "../../src/protocol/eip3009.js";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { HARDHAT_KEYS, makePayment, openFacilitator } from "../helpers/facilitator.js";
import { relayerNonce } from "../helpers/settle.js";
import { deployOwnerWallet, walletOwnerKey, walletPayment } from "../helpers/wallets.js";

type Opened = Awaited<ReturnType<typeof openFacilitator>>;

async function verify(opened: Opened, body: object) {
  const response = await request(opened.app).post("/v2/x402/verify").set("X402-Version", "1").send(body);
  return { status: response.status, body: response.body as Record<string, unknown> };
}

/** The buyer's authorization, signed over the very same message by another key. */
async function signedByAnotherKey(opened: Opened) {
  const payment = await makePayment(opened.chain);
  const { info, token } = opened.chain;
  const domain = { name: info.domain.name, version: info.domain.version, chainId: info.chainId, verifyingContract: token };
  const signature = await privateKeyToAccount(HARDHAT_KEYS.buyer2).signTypedData(transferAuthorizationTypedData(domain, payment.message));
  const paymentHeader = encodePaymentHeader({ network: info.network, ...payment.message, value: payment.message.value.toString(), signature, asset: token });
  return { ...payment.body, paymentHeader };
}

describe("facilitator verify without the state index: the signature before the chain, and the reads it costs", () => {
  let opened: Opened;
  beforeEach(async () => {
    // A fresh facilitator per test: its per-block read cache starts empty, so every read is counted. These are the
    // reads verify makes itself (STATE_INDEX=false, or while the index cannot vouch); with the index, test/state.
    opened = await openFacilitator("cronos-testnet", { STATE_INDEX: "false" });
  });

  it("answers a signature that is not the payer's after one read, the payer's code (no head, nonce or balance read)", async () => {
    const body = await signedByAnotherKey(opened);
    expect(await verify(opened, body)).to.deep.equal({ status: 200, body: { isValid: false, invalidReason: VerifyReason.invalidSignature } });
    expect(opened.rpc.methods()).to.deep.equal(["eth_getCode"]);
    expect(opened.rpc.calls[0]!.params).to.deep.equal([opened.buyer.address, "latest"]);
  });

  it("reads the head, then the payer's code, nonce state and balance at that head (four reads) for the payer's own signature", async () => {
    const { body } = await makePayment(opened.chain);
    expect(await verify(opened, body)).to.deep.equal({ status: 200, body: { isValid: true, invalidReason: null } });
    const [head, ...pinned] = opened.rpc.calls;
    expect(head!.method).to.equal("eth_getBlockByNumber");
    expect(pinned.map((call) => call.method).sort()).to.deep.equal(["eth_call", "eth_call", "eth_getCode"]);
    const block = await opened.chain.publicClient.getBlockNumber();
    for (const call of pinned) expect(call.params.at(-1)).to.equal(numberToHex(block));
  });

  it("still answers Invalid EIP-3009 signature with the RPC down for every read but the payer's code; a good signature then answers 500", async () => {
    for (const method of ["eth_getBlockByNumber", "eth_call", "eth_getBalance", "eth_blockNumber"]) opened.rpc.failing.add(method);
    expect(await verify(opened, await signedByAnotherKey(opened))).to.deep.equal({
      status: 200,
      body: { isValid: false, invalidReason: VerifyReason.invalidSignature },
    });
    // The payer's own signature needs the chain's clock and state: without them there is no answer but a fault.
    const good = await verify(opened, (await makePayment(opened.chain)).body);
    expect(good).to.deep.equal({ status: 500, body: { isValid: false, invalidReason: "Service unavailable: cannot read cronos-testnet state", error: "Service unavailable: cannot read cronos-testnet state" } });
  });

  it("asks a contract wallet through ERC-1271 with the ERC1271_GAS_LIMIT as the call's gas, and reads nonce and balance only once it accepted", async () => {
    const wallet = await deployOwnerWallet(opened.chain);
    await opened.chain.contract.write.mint([wallet.address, 5_000_000n]);
    const good = await walletPayment(opened.chain, wallet, { payTo: opened.seller.address });
    const forged = await walletPayment(opened.chain, { ...wallet, sign: (hash) => walletOwnerKey("not the owner").sign({ hash }) }, { payTo: opened.seller.address });
    opened.rpc.reset();

    expect(await verify(opened, forged.body)).to.deep.equal({ status: 200, body: { isValid: false, invalidReason: VerifyReason.invalidSignature } });
    expect(opened.rpc.methods()).to.deep.equal(["eth_getCode", "eth_getBlockByNumber", "eth_call"]);
    const isValidSignature = opened.rpc.calls[2]!.params[0] as { to: Hex; gas: Hex };
    expect(isValidSignature.to.toLowerCase()).to.equal(wallet.address.toLowerCase());
    expect(isValidSignature.gas).to.equal(numberToHex(150_000));

    opened.rpc.reset();
    expect(await verify(opened, good.body)).to.deep.equal({ status: 200, body: { isValid: true, invalidReason: null } });
    expect(opened.rpc.methods()).to.deep.equal(["eth_getCode", "eth_getBlockByNumber", "eth_call", "eth_call", "eth_call"]);
  });

  it("sends no transaction: payer and payee balances and the relayer's nonce are the same after verify (EOA, contract wallet, refused)", async () => {
    const wallet = await deployOwnerWallet(opened.chain);
    await opened.chain.contract.write.mint([wallet.address, 5_000_000n]);
    const payee = opened.seller.address;
    const snapshot = () =>
      Promise.all([
        opened.chain.contract.read.balanceOf([opened.buyer.address]),
        opened.chain.contract.read.balanceOf([wallet.address]),
        opened.chain.contract.read.balanceOf([payee]),
        relayerNonce(opened),
        opened.chain.publicClient.getBlockNumber({ cacheTime: 0 }),
      ]);
    const before = await snapshot();
    const answers = [
      await verify(opened, (await makePayment(opened.chain)).body),
      await verify(opened, (await walletPayment(opened.chain, wallet, { payTo: payee })).body),
      await verify(opened, await signedByAnotherKey(opened)),
    ];
    expect(answers.map((a) => a.body.isValid)).to.deep.equal([true, true, false]);
    expect(opened.rpc.methods()).to.not.include("eth_sendRawTransaction");
    expect(opened.rpc.methods()).to.not.include("eth_estimateGas");
    expect(await snapshot()).to.deep.equal(before);
  });
});
