import { expect } from "chai";
import hre from "hardhat";
import { toEventSignature, toFunctionSignature, type Abi, type AbiEvent, type AbiFunction } from "viem";
import { erc1271Abi, tokenAbi, tokenInitializeAbi } from "../../src/chain/token-abi.js";

// The kit talks to the token through src/chain/token-abi.ts; every entry must exist, with the same
// shape, in the compiled BridgedUSDC (and the ERC-1271 entry in the test wallet).

const functions = (abi: Abi) => abi.filter((item): item is AbiFunction => item.type === "function");
const events = (abi: Abi) => abi.filter((item): item is AbiEvent => item.type === "event");
const outputTypes = (item: AbiFunction) => item.outputs.map((output) => output.type).join(",");
const indexed = (item: AbiEvent) => item.inputs.map((input) => Boolean(input.indexed)).join(",");

function expectSubset(label: string, subset: Abi, artifact: Abi) {
  const byFunctionSignature = new Map(functions(artifact).map((item) => [toFunctionSignature(item), item]));
  const byEventSignature = new Map(events(artifact).map((item) => [toEventSignature(item), item]));
  for (const item of functions(subset)) {
    const signature = toFunctionSignature(item);
    const compiled = byFunctionSignature.get(signature);
    expect(compiled, `${label}: function ${signature} is missing from the artifact`).to.not.equal(undefined);
    expect(compiled!.stateMutability, `${label}: state mutability of ${signature}`).to.equal(item.stateMutability);
    expect(outputTypes(compiled!), `${label}: outputs of ${signature}`).to.equal(outputTypes(item));
  }
  for (const item of events(subset)) {
    const signature = toEventSignature(item);
    const compiled = byEventSignature.get(signature);
    expect(compiled, `${label}: event ${signature} is missing from the artifact`).to.not.equal(undefined);
    expect(indexed(compiled!), `${label}: indexed flags of ${signature}`).to.equal(indexed(item));
  }
}

describe("BridgedUSDC ABI used by the kit", () => {
  let bridgedUsdc: Abi;
  let wallet: Abi;

  before(async () => {
    bridgedUsdc = (await hre.artifacts.readArtifact("BridgedUSDC")).abi as Abi;
    wallet = (await hre.artifacts.readArtifact("ERC1271Wallet")).abi as Abi;
  });

  it("every function of tokenAbi exists in the compiled BridgedUSDC with the same mutability and outputs", () => {
    expect(functions(tokenAbi).length).to.be.greaterThan(0);
    expectSubset("tokenAbi", functions(tokenAbi), bridgedUsdc);
  });

  it("every event of tokenAbi exists in the compiled BridgedUSDC with the same indexed parameters", () => {
    expect(events(tokenAbi).length).to.be.greaterThan(0);
    expectSubset("tokenAbi", events(tokenAbi), bridgedUsdc);
  });

  it("tokenAbi has both overloads of transferWithAuthorization, receiveWithAuthorization and cancelAuthorization", () => {
    const signatures = functions(tokenAbi).map((item) => toFunctionSignature(item));
    expect(signatures).to.include.members([
      "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)",
      "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
      "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)",
      "receiveWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
      "cancelAuthorization(address,bytes32,uint8,bytes32,bytes32)",
      "cancelAuthorization(address,bytes32,bytes)",
    ]);
  });

  it("tokenInitializeAbi matches BridgedUSDC's initialize", () => {
    expectSubset("tokenInitializeAbi", tokenInitializeAbi, bridgedUsdc);
  });

  it("erc1271Abi matches the test ERC1271Wallet's isValidSignature", () => {
    expectSubset("erc1271Abi", erc1271Abi, wallet);
  });
});
