import { expect } from "chai";
import { encodeAbiParameters, getAbiItem, pad, toEventSelector, type Address, type Hex, type TransactionReceipt } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { AUTHORIZATION_CANCELED_TOPIC, AUTHORIZATION_USED_TOPIC, spendOf, type PaymentTerms } from "../../src/settlement/receipt-transfer.js";
import { HARDHAT_KEYS } from "../helpers/facilitator.js";

// The receipt reading alone, on logs built by hand: what a payer could write elsewhere must never read as its payment.

const TOKEN: Address = "0xc01efAaF7C5C61bEbFAeb358E1161b537b8bC0e0";
const OTHER: Address = "0x00000000000000000000000000000000000b0b0b";
const payer = privateKeyToAccount(HARDHAT_KEYS.buyer).address;
const seller = privateKeyToAccount(HARDHAT_KEYS.seller).address;
const nonce: Hex = `0x${"ab".repeat(32)}`;
const terms: PaymentTerms = { token: TOKEN, from: payer, nonce, payTo: seller, value: 700n };
const TRANSFER = toEventSelector(getAbiItem({ abi: tokenAbi, name: "Transfer" }));

const log = (address: Address, topics: Hex[], data: Hex = "0x", logIndex = 0) => ({ address, topics, data, logIndex }) as unknown as TransactionReceipt["logs"][number];
const used = (logIndex = 0, address = TOKEN) => log(address, [AUTHORIZATION_USED_TOPIC, pad(payer), nonce], "0x", logIndex);
const transfer = (to: Address, value: bigint, logIndex = 1, address = TOKEN, from: Address = payer) =>
  log(address, [TRANSFER, pad(from), pad(to)], encodeAbiParameters([{ type: "uint256" }], [value]), logIndex);
const receipt = (logs: TransactionReceipt["logs"], status: "success" | "reverted" = "success") => ({ status, logs });

describe("settlement: what one receipt does to an authorization (spendOf)", () => {
  it("paid: the token's AuthorizationUsed followed by its Transfer(from, payTo, value), logs in any order of the array", () => {
    expect(spendOf(receipt([transfer(seller, 700n, 1), used(0)]), terms)).to.deep.equal({ kind: "paid", from: payer, to: seller, value: 700n });
  });

  it("another payee or another value under the nonce: used for another transfer, not this payment", () => {
    expect(spendOf(receipt([used(0), transfer(payer, 1n)]), terms)).to.deep.equal({ kind: "otherTransfer" });
    expect(spendOf(receipt([used(0), transfer(seller, 699n)]), terms)).to.deep.equal({ kind: "otherTransfer" });
  });

  it("a matching Transfer from another contract, or one not right after the AuthorizationUsed, is not the payment", () => {
    expect(spendOf(receipt([used(0), transfer(seller, 700n, 1, OTHER)]), terms)).to.deep.equal({ kind: "otherTransfer" });
    expect(spendOf(receipt([used(0), transfer(payer, 1n, 1), transfer(seller, 700n, 2)]), terms)).to.deep.equal({ kind: "otherTransfer" });
    expect(spendOf(receipt([transfer(seller, 700n, 0), used(1)]), terms)).to.deep.equal({ kind: "otherTransfer" });
  });

  it("an AuthorizationUsed written by another contract, a reverted receipt, or another nonce: nothing of this authorization", () => {
    expect(spendOf(receipt([used(0, OTHER), transfer(seller, 700n)]), terms)).to.deep.equal({ kind: "none" });
    expect(spendOf(receipt([used(0), transfer(seller, 700n)], "reverted"), terms)).to.deep.equal({ kind: "none" });
    expect(spendOf(receipt([used(0), transfer(seller, 700n)]), { ...terms, nonce: `0x${"cd".repeat(32)}` })).to.deep.equal({ kind: "none" });
  });

  it("the payer's AuthorizationCanceled of the nonce: canceled", () => {
    expect(spendOf(receipt([log(TOKEN, [AUTHORIZATION_CANCELED_TOPIC, pad(payer), nonce])]), terms)).to.deep.equal({ kind: "canceled" });
  });
});
