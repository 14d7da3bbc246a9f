import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import express from "express";
import { hashDomain, hashStruct, keccak256, toBytes, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { createPaymentHeader, createV2PaymentPayload } from "../../src/buyer/index.js";
import { runSign } from "../../src/cli/sign.js";
import { transferAuthorizationTypedData, TRANSFER_WITH_AUTHORIZATION_TYPEHASH, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../../src/protocol/eip3009.js";
import { encodeBase64Json } from "../../src/protocol/header.js";
import { NETWORKS } from "../../src/protocol/networks.js";
import { facilitatorRequestSchema, paymentHeaderSchema, settleResponseSchema, verifyResponseSchema } from "../../src/protocol/schemas.js";
import { v2PaymentPayloadSchema, v2PaymentRequiredSchema } from "../../src/protocol/x402v2.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { listen } from "../helpers/http.js";
import { ROOT } from "../helpers/processes.js";
import { VECTOR_MESSAGE, VECTOR_PAYEE, VECTOR_SIGNER, VECTOR_STRUCT_HASH, VECTORS } from "../helpers/vectors.js";

// docs/wire-format.md, block by block: each block marked `<!-- check: NAME -->` is what the code writes (the test
// vectors signed again, the seller's 402 answered again) or reads (the kit's schemas), and no block goes unchecked.

const DOC = readFileSync(join(ROOT, "docs", "wire-format.md"), "utf8");

/** Each marked block: its name and its text (a fenced block's content, or a table's lines). */
function markedBlocks(): Map<string, string> {
  const blocks = new Map<string, string>();
  for (const match of DOC.matchAll(/<!-- check: ([a-z0-9-]+) -->\n(```[a-z]*\n([\s\S]*?)```|(\|[^\n]*\n)+)/g)) {
    blocks.set(match[1]!, match[3] ?? match[2]!);
  }
  return blocks;
}
const BLOCKS = markedBlocks();
const block = (name: string) => {
  const text = BLOCKS.get(name);
  expect(text, name).to.be.a("string");
  return text!;
};
const json = (name: string) => JSON.parse(block(name)) as Record<string, any>;
const line = (name: string) => block(name).trim();

/** Vector A's (or M's) requirements as a seller writes them. */
const requirementsA = () => paymentRequirements({ network: "cronos-testnet", payTo: VECTOR_PAYEE, amount: 1_000_000n, resource: "https://seller.example/weather", description: "Weather" });
const signer = privateKeyToAccount(VECTOR_SIGNER.privateKey);
const WINDOW = { validAfter: 0, validBefore: 1_893_456_000, nonce: VECTOR_MESSAGE.nonce };

describe("docs/wire-format.md: every layout and test vector, against the code", function () {
  this.timeout(60_000);

  it("checks every fenced block of the document (each has a marker this test knows)", () => {
    const fenced = [...DOC.matchAll(/```/g)].length / 2;
    const fencedMarked = [...BLOCKS.values()].filter((text) => !text.startsWith("|")).length;
    expect(fencedMarked).to.equal(fenced);
    expect([...BLOCKS.keys()].sort()).to.deep.equal(
      [
        "typed-data",
        "vector-inputs",
        "vector-signatures",
        "cronos-json",
        "cronos-header",
        "cronos-cli",
        "cronos-mainnet-header",
        "v2-json",
        "v2-header",
        "402-body",
        "402-payment-required",
        "402-payment-required-header",
        "verify-request",
        "verify-answer",
        "settle-answer",
        "settle-failed-answer",
      ].sort(),
    );
  });

  it("the typed data, the inputs, each vector's domain separator and signature: as the code computes them", async () => {
    const typed = json("typed-data");
    const testnet = NETWORKS["cronos-testnet"];
    expect(typed.domain).to.deep.equal({ ...testnet.domain, chainId: testnet.chainId, verifyingContract: testnet.token });
    expect(typed.types).to.deep.equal(TRANSFER_WITH_AUTHORIZATION_TYPES);
    expect(typed.primaryType).to.equal("TransferWithAuthorization");
    const typeString = "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)";
    expect(DOC).to.contain(`\`keccak256("${typeString}")\`\n= \`${TRANSFER_WITH_AUTHORIZATION_TYPEHASH}\``);
    expect(keccak256(toBytes(typeString))).to.equal(TRANSFER_WITH_AUTHORIZATION_TYPEHASH);
    const inputs = json("vector-inputs");
    expect(inputs).to.deep.equal({
      privateKey: VECTOR_SIGNER.privateKey,
      from: VECTOR_SIGNER.address,
      to: VECTOR_PAYEE,
      value: "1000000",
      validAfter: 0,
      validBefore: 1_893_456_000,
      nonce: VECTOR_MESSAGE.nonce,
      structHash: VECTOR_STRUCT_HASH,
    });
    expect(hashStruct({ data: VECTOR_MESSAGE, primaryType: "TransferWithAuthorization", types: TRANSFER_WITH_AUTHORIZATION_TYPES })).to.equal(VECTOR_STRUCT_HASH);
    const rows = block("vector-signatures").trim().split("\n").slice(2).map((row) => row.split("|").map((cell) => cell.trim().replaceAll("`", "")));
    expect(rows.map((cells) => cells[1])).to.deep.equal(["A", "M"]);
    for (const cells of rows) {
      const vector = VECTORS[cells[1] as "A" | "M"];
      const domain = { name: "Bridged USDC (Stargate)", version: vector.version, chainId: vector.chainId, verifyingContract: vector.verifyingContract };
      expect(hashDomain({ domain: { ...domain, chainId: BigInt(domain.chainId) }, types: { EIP712Domain: [{ name: "name", type: "string" }, { name: "version", type: "string" }, { name: "chainId", type: "uint256" }, { name: "verifyingContract", type: "address" }] } })).to.equal(cells[3]);
      expect(await signer.signTypedData(transferAuthorizationTypedData(domain, VECTOR_MESSAGE))).to.equal(cells[4]);
      expect(cells[4]).to.equal(vector.signature);
    }
  });

  it("X-PAYMENT: the JSON and the header createPaymentHeader writes for vector A (and M), read back by the schema", async () => {
    const header = await createPaymentHeader({ signer, requirements: requirementsA(), ...WINDOW });
    expect(header).to.equal(line("cronos-header"));
    expect(Buffer.from(header, "base64").toString("utf8")).to.equal(line("cronos-json"));
    expect(paymentHeaderSchema.safeParse(json("cronos-json")).success).to.equal(true);
    const mainnet = paymentRequirements({ network: "cronos-mainnet", payTo: VECTOR_PAYEE, amount: 1_000_000n });
    const mainnetHeader = await createPaymentHeader({ signer, requirements: mainnet, ...WINDOW });
    expect(mainnetHeader).to.equal(line("cronos-mainnet-header"));
    expect(JSON.parse(Buffer.from(mainnetHeader, "base64").toString("utf8")).payload.signature).to.equal(VECTORS.M.signature);
  });

  it("the command line of the document prints vector A's header", async () => {
    const dir = mkdtempSync(join(tmpdir(), "x402-wire-doc-"));
    try {
      writeFileSync(join(dir, "account0.key"), `${VECTOR_SIGNER.privateKey}\n`);
      const words = block("cronos-cli").replaceAll("\\\n", " ").trim().split(/\s+/);
      expect(words.slice(0, 2)).to.deep.equal(["cronos-x402", "sign"]);
      let stdout = "";
      let stderr = "";
      const argv = words.slice(2).map((word) => (word === "account0.key" ? join(dir, "account0.key") : word));
      const code = await runSign(argv, { stdout: (text) => void (stdout += text), stderr: (text) => void (stderr += text) }, {});
      expect([code, stderr, stdout]).to.deep.equal([0, "", `${line("cronos-header")}\n`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the 402 answer the kit's seller sends (body and PAYMENT-REQUIRED), and PAYMENT-SIGNATURE signed for its offer, as the document has them", async () => {
    const app = express();
    app.get("/weather", requirePayment(requirementsA(), { facilitatorUrl: "http://127.0.0.1:9" }), (_req, res) => void res.json({}));
    const seller = await listen(app);
    try {
      const response = await fetch(`${seller.url}/weather`);
      expect(response.status).to.equal(402);
      expect(await response.text()).to.equal(line("402-body"));
      const paymentRequired = response.headers.get("PAYMENT-REQUIRED")!;
      expect(paymentRequired).to.equal(line("402-payment-required-header"));
      expect(Buffer.from(paymentRequired, "base64").toString("utf8")).to.equal(line("402-payment-required"));
      const offer = v2PaymentRequiredSchema.parse(json("402-payment-required"));
      const payment = await createV2PaymentPayload({ signer, requirements: offer.accepts[0] as Record<string, unknown>, resource: offer.resource, ...WINDOW });
      expect(JSON.stringify(payment)).to.equal(line("v2-json"));
      expect(encodeBase64Json(payment)).to.equal(line("v2-header"));
      expect(v2PaymentPayloadSchema.safeParse(json("v2-json")).success).to.equal(true);
      expect(payment.payload.signature).to.equal(VECTORS.A.signature);
      // The same from the command line, the 402 as `curl -si` prints it.
      const dir = mkdtempSync(join(tmpdir(), "x402-wire-doc-"));
      try {
        writeFileSync(join(dir, "402.txt"), `HTTP/1.1 402 Payment Required\r\npayment-required: ${paymentRequired}\r\ncontent-type: application/json\r\n\r\n${line("402-body")}`);
        let stdout = "";
        const argv = ["--from-402", join(dir, "402.txt"), "--dialect", "x402v2", "--key", VECTOR_SIGNER.privateKey, "--valid-before", "1893456000", "--nonce", VECTOR_MESSAGE.nonce];
        expect(await runSign(argv, { stdout: (text) => void (stdout += text), stderr: () => undefined }, {})).to.equal(0);
        expect(stdout).to.equal(`${line("v2-header")}\n`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    } finally {
      await seller.close();
    }
  });

  it("verify's and settle's request and answers: the kit's schemas read them, with no field they do not know", () => {
    const request = json("verify-request");
    expect(facilitatorRequestSchema.parse(request)).to.deep.equal({ x402Version: 1, paymentHeader: line("cronos-header"), paymentRequirements: requirementsA() });
    expect(verifyResponseSchema.parse(json("verify-answer"))).to.deep.equal(json("verify-answer"));
    for (const name of ["settle-answer", "settle-failed-answer"]) expect(settleResponseSchema.parse(json(name))).to.deep.equal(json(name));
    expect(json("settle-answer").from).to.equal(VECTOR_SIGNER.address as Hex);
  });
});
