import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "chai";
import request from "supertest";
import { custom, parseEventLogs, type Address, type Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { loadConfig } from "../../src/facilitator/config/index.js";
import type { Facilitator } from "../../src/facilitator/server.js";
import { startTestPostgres, type TestPostgres } from "../../src/harness/postgres.js";
import { openLedger } from "../../src/ledger/open.js";
import type { Ledger } from "../../src/ledger/types.js";
import { tokenAbi } from "../../src/chain/token-abi.js";
import { cancelAuthorization, createTestFacilitator, HARDHAT_KEYS, makePayment, TEST_ENV, useAuthorizationOnChain, v2BodyOf, type Chain } from "../helpers/facilitator.js";
import { waitUntil } from "../helpers/wait.js";
import { openChain } from "../helpers/token.js";

// What the ledger knows is bound to the chain it learned it on (issue 28): a local chain restarted under a
// persistent ledger (same ids 338, same token address, a new history), and a snapshot reverted under a running
// facilitator. Every answer is checked against the chain's own state.

const freshNonce = () => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex;
const buyer = privateKeyToAccount(HARDHAT_KEYS.buyer);
const buyer2 = privateKeyToAccount(HARDHAT_KEYS.buyer2);
const seller = privateKeyToAccount(HARDHAT_KEYS.seller);

/** A facilitator on `chain` with the tests' settings and `env` (its ledger named there), not listening. */
function facilitatorOn(chain: Chain, env: Record<string, string>): Promise<Facilitator> {
  const config = loadConfig({ ...TEST_ENV, ...env }, { embedded: ["cronos-testnet"] });
  return createTestFacilitator(config, { transports: { "cronos-testnet": custom(chain.connection.provider) } });
}

/** Waits until the facilitator's state index follows the chain with its backfill done. */
async function indexReady(facilitator: Facilitator): Promise<void> {
  const index = facilitator.context.networks.get("cronos-testnet")!.index!;
  expect(await waitUntil(async () => index.status().backfill.state === "done" && index.status().state === "following", 10_000, 10), JSON.stringify(index.status())).to.equal(true);
}

/** An x402 v2 body for `made`, with a payment identifier and, optionally, its seller's catalog declaration of `resource`. */
function v2Body(made: Awaited<ReturnType<typeof makePayment>>, options: { paymentId?: string; resource?: string } = {}) {
  const body = v2BodyOf(made);
  const extensions: Record<string, unknown> = {};
  if (options.paymentId) extensions["payment-identifier"] = { info: { required: false, id: options.paymentId } };
  const declared = options.resource && {
    resource: { url: options.resource, description: "a paid resource", mimeType: "application/json" },
    bazaar: { info: { input: { type: "http", method: "GET" }, output: { type: "json" } }, schema: {} },
  };
  return {
    ...body,
    paymentPayload: { ...body.paymentPayload, extensions },
    paymentRequirements: { ...body.paymentRequirements, extra: { ...body.paymentRequirements.extra, ...declared } },
  };
}

/** The payment a settled transaction's receipt shows: the token's Transfer of the buyer's authorization. */
async function paidOnChain(chain: Chain, hash: Hex): Promise<{ from: Address; to: Address; value: bigint }> {
  const receipt = await chain.publicClient.getTransactionReceipt({ hash });
  expect(receipt.status).to.equal("success");
  const [transfer] = parseEventLogs({ abi: tokenAbi, logs: receipt.logs, eventName: "Transfer" });
  return { from: transfer!.args.from, to: transfer!.args.to, value: transfer!.args.value };
}

interface LedgerPlace {
  name: string;
  env(): Record<string, string>;
  setUp(): Promise<void>;
  tearDown(): Promise<void>;
}

/** An embedded ledger file in a temporary folder (what `npm run facilitator` keeps across runs). */
function ledgerFile(): LedgerPlace {
  let dir = "";
  return {
    name: "an embedded ledger file",
    env: () => ({ LEDGER_FILE: join(dir, "ledger.db") }),
    async setUp() {
      dir = mkdtempSync(join(tmpdir(), "x402-identity-"));
    },
    async tearDown() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A PostgreSQL database on the harness's embedded server. */
function postgres(): LedgerPlace {
  let server: TestPostgres | undefined;
  let url = "";
  return {
    name: "PostgreSQL",
    env: () => ({ DATABASE_URL: url }),
    async setUp() {
      server = await startTestPostgres();
      url = await server.createDatabase();
    },
    async tearDown() {
      await server?.stop();
    },
  };
}

describe("chain identity: what the ledger knows is bound to the chain it learned it on", function () {
  this.timeout(180_000);

  for (const place of [ledgerFile(), postgres()]) {
    describe(`a local chain restarted under ${place.name}`, () => {
      before(() => place.setUp());
      after(() => place.tearDown());

      it("answers from the new chain only: an authorization used and one canceled there are used, the old chain's settlement, identifier, catalog entry and penalty are gone (kept aside)", async () => {
        // The first chain: a payment with an identifier, one declaring a catalog entry, a payer penalised.
        const first = await openChain("cronos-testnet");
        const f1 = await facilitatorOn(first, place.env());
        await indexReady(f1);
        const paymentId = "pay_restart_identity_0001";
        const paid = await makePayment(first);
        const paidBody = v2Body(paid, { paymentId });
        const settled = await request(f1.app).post("/v2/x402/settle").send(paidBody);
        expect(settled.body).to.include({ success: true });
        const oldHash = settled.body.transaction as Hex;
        const listed = await makePayment(first);
        const resource = "https://seller.example/restart-weather";
        expect((await request(f1.app).post("/v2/x402/settle").send(v2Body(listed, { resource }))).body).to.include({ success: true });
        expect((await request(f1.app).get("/v2/x402/discovery/resources")).body.items.map((item: { resource: string }) => item.resource)).to.include(resource);
        await f1.context.ledger.penalize({ chainId: 338, token: first.token, kind: "payer", subject: buyer2.address.toLowerCase(), until: 9_999_999_999n });
        // The index stores what it follows (every 2 s): the ledger's progress then reaches the first chain's head.
        const head = await first.publicClient.getBlockNumber();
        expect(await waitUntil(async () => (await f1.context.ledger.nonceIndexProgress({ chainId: 338, token: first.token }))?.throughBlock === head, 10_000, 50)).to.equal(true);
        await f1.close(0);

        // The chain restarts: same ids, same token address, a new history. Before the facilitator is back, one
        // authorization is used and another canceled on it.
        const second = await openChain("cronos-testnet");
        expect(second.token).to.equal(first.token);
        const used = freshNonce();
        const canceled = freshNonce();
        await useAuthorizationOnChain(second, used);
        await cancelAuthorization({ chain: second, buyer } as Parameters<typeof cancelAuthorization>[0], canceled);
        const state = (nonce: Hex) => second.contract.read.authorizationState([buyer.address, nonce]);
        expect([await state(used), await state(canceled), await state(paid.message.nonce)]).to.deep.equal([true, true, false]);

        const f2 = await facilitatorOn(second, place.env());
        try {
          await indexReady(f2);
          for (const nonce of [used, canceled]) {
            const verified = await request(f2.app).post("/v2/x402/verify").send((await makePayment(second, { nonce })).body);
            expect([verified.status, verified.body]).to.deep.equal([200, { isValid: false, invalidReason: "Authorization already used" }]);
          }
          // The old chain's settlement is no answer: neither by hash nor by authorization.
          expect((await request(f2.app).get(`/v2/x402/settlements/${oldHash}`)).status).to.equal(404);
          const byAuthorization = await request(f2.app).get("/v2/x402/settlements").query({ network: "cronos-testnet", from: buyer.address, nonce: paid.message.nonce });
          expect(byAuthorization.status).to.equal(404);
          // Nor its catalog entry.
          expect((await request(f2.app).get("/v2/x402/discovery/resources")).body.items.map((item: { resource: string }) => item.resource)).to.not.include(resource);
          // The same payment under the same identifier is paid on the new chain: a new transaction, the seller paid there.
          const before = await second.contract.read.balanceOf([seller.address]);
          const again = await request(f2.app).post("/v2/x402/settle").send(paidBody);
          expect(again.body).to.include({ success: true, network: "eip155:338" });
          expect(again.body.transaction).to.not.equal(oldHash);
          expect(await paidOnChain(second, again.body.transaction)).to.deep.equal({ from: buyer.address, to: seller.address, value: 1_000_000n });
          expect(await second.contract.read.balanceOf([seller.address])).to.equal(before + 1_000_000n);
          // The old chain's penalty is no answer either: the payer's settle goes through.
          const other = await makePayment(second, { payer: buyer2 });
          expect((await request(f2.app).post("/v2/x402/settle").send(other.body)).body).to.include({ event: "payment.settled" });
        } finally {
          await f2.close(0);
        }

        // Kept aside, tagged with the history they belonged to.
        const ledger: Ledger = await openLedger(place.env().DATABASE_URL ? { databaseUrl: place.env().DATABASE_URL } : { file: place.env().LEDGER_FILE });
        try {
          const aside = await ledger.setAsideRows({ chainId: 338 });
          const settlements = aside.filter((row) => row.kind === "settlement").map((row) => row.row.tx_hash);
          expect(settlements).to.include(oldHash);
          expect(aside.map((row) => row.kind)).to.include.members(["settlement_transaction", "payment_identifier", "penalty", "catalog_entry"]);
          expect((await ledger.chainHistory(338))!.genesisHash).to.equal((await second.publicClient.getBlock({ blockNumber: 0n })).hash);
        } finally {
          await ledger.close();
        }
      });
    });
  }

  it("follows a chain restarted under a running facilitator: the new chain's spent authorizations are used, the old chain's settlement is no answer", async () => {
    const dir = mkdtempSync(join(tmpdir(), "x402-restart-live-"));
    const first = await openChain("cronos-testnet");
    let current = first;
    // One RPC whose chain is swapped under the facilitator (what a restarted local node looks like from outside).
    const transport = custom({ request: (args: { method: string; params?: unknown }) => current.connection.provider.request(args as never) });
    const config = loadConfig({ ...TEST_ENV, LEDGER_FILE: join(dir, "ledger.db") }, { embedded: ["cronos-testnet"] });
    const facilitator = await createTestFacilitator(config, { transports: { "cronos-testnet": transport } });
    try {
      await indexReady(facilitator);
      const paid = await makePayment(first);
      const settled = await request(facilitator.app).post("/v2/x402/settle").send(paid.body);
      expect(settled.body.event).to.equal("payment.settled");
      expect((await request(facilitator.app).post("/v2/x402/verify").send(paid.body)).body).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });
      const head = await first.publicClient.getBlockNumber();
      expect(await waitUntil(async () => (await facilitator.context.ledger.nonceIndexProgress({ chainId: 338, token: first.token }))?.throughBlock === head, 10_000, 50)).to.equal(true);

      const second = await openChain("cronos-testnet");
      const used = freshNonce();
      await useAuthorizationOnChain(second, used);
      current = second;
      // Right away, and every time after: the new chain's state.
      expect((await request(facilitator.app).post("/v2/x402/verify").send((await makePayment(second, { nonce: used })).body)).body).to.deep.equal({
        isValid: false,
        invalidReason: "Authorization already used",
      });
      expect((await request(facilitator.app).post("/v2/x402/verify").send(paid.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
      expect(await second.contract.read.authorizationState([buyer.address, paid.message.nonce])).to.equal(false);
      expect(await waitUntil(async () => (await request(facilitator.app).get(`/v2/x402/settlements/${settled.body.txHash}`)).status === 404, 10_000, 50)).to.equal(true);
      const index = facilitator.context.networks.get("cronos-testnet")!.index!;
      expect(await waitUntil(async () => index.status().state === "following" && index.status().block === Number(await second.publicClient.getBlockNumber()), 10_000, 20)).to.equal(true);
      expect(await index.spentAt(buyer.address, used)).to.deep.equal({ spent: true, blockNumber: await second.publicClient.getBlockNumber() });
      expect(await index.spentAt(buyer.address, paid.message.nonce)).to.deep.equal({ spent: false });
    } finally {
      await facilitator.close(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("a snapshot reverted under a running facilitator", () => {
    let dir: string;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), "x402-revert-"));
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    for (const stateIndex of ["true", "false"]) {
      it(`answers verify from the reverted state right after the revert (STATE_INDEX=${stateIndex}): an authorization settled after the snapshot is unused again`, async () => {
        const chain = await openChain("cronos-testnet");
        const facilitator = await facilitatorOn(chain, { LEDGER_FILE: join(dir, "ledger.db"), STATE_INDEX: stateIndex });
        try {
          if (stateIndex === "true") await indexReady(facilitator);
          const provider = chain.connection.provider;
          const snapshot = (await provider.request({ method: "evm_snapshot", params: [] })) as Hex;
          const snapshotBlock = await chain.publicClient.getBlockNumber();
          const payment = await makePayment(chain);
          expect((await request(facilitator.app).post("/v2/x402/settle").send(payment.body)).body.event).to.equal("payment.settled");
          // Used now, and remembered as used (the index, the chain reads' cache).
          for (let i = 0; i < 3; i++) expect((await request(facilitator.app).post("/v2/x402/verify").send(payment.body)).body).to.deep.equal({ isValid: false, invalidReason: "Authorization already used" });
          await provider.request({ method: "evm_revert", params: [snapshot] });
          expect(await chain.contract.read.authorizationState([buyer.address, payment.message.nonce])).to.equal(false);
          const answers: unknown[] = [];
          for (let i = 0; i < 20; i++) answers.push((await request(facilitator.app).post("/v2/x402/verify").send(payment.body)).body);
          expect(answers).to.deep.equal(Array.from({ length: 20 }, () => ({ isValid: true, invalidReason: null })));
          if (stateIndex === "true") {
            const index = facilitator.context.networks.get("cronos-testnet")!.index!;
            expect(index.status()).to.deep.include({ state: "following", block: Number(snapshotBlock) });
          }
        } finally {
          await facilitator.close(0);
        }
      });
    }

    it("sets the reverted settlement aside once another block proves the history replaced: the lookup no longer finds it, and the same payment is paid again on chain", async () => {
      const chain = await openChain("cronos-testnet");
      const facilitator = await facilitatorOn(chain, { LEDGER_FILE: join(dir, "ledger.db") });
      try {
        await indexReady(facilitator);
        const provider = chain.connection.provider;
        const payment = await makePayment(chain);
        // Stored first: the index's progress reaches past the snapshot, as after any settle a while ago.
        const early = await makePayment(chain);
        const earlyHash = (await request(facilitator.app).post("/v2/x402/settle").send(early.body)).body.txHash as Hex;
        const snapshot = (await provider.request({ method: "evm_snapshot", params: [] })) as Hex;
        const settled = await request(facilitator.app).post("/v2/x402/settle").send(payment.body);
        expect(settled.body.event).to.equal("payment.settled");
        const head = await chain.publicClient.getBlockNumber();
        expect(await waitUntil(async () => (await facilitator.context.ledger.nonceIndexProgress({ chainId: 338, token: chain.token }))?.throughBlock === head, 10_000, 50)).to.equal(true);
        await provider.request({ method: "evm_revert", params: [snapshot] });
        // Another block at the settlement's height: the history is proven replaced.
        await provider.request({ method: "evm_mine", params: [] });
        // A verify asks the index to follow the chain: it finds the block replaced, and the ledger is bound to the chain again.
        expect((await request(facilitator.app).post("/v2/x402/verify").send(payment.body)).body).to.deep.equal({ isValid: true, invalidReason: null });
        expect(await waitUntil(async () => (await request(facilitator.app).get(`/v2/x402/settlements/${settled.body.txHash}`)).status === 404, 10_000, 50)).to.equal(true);
        // The settlement before the snapshot is still there; the reverted one is kept aside.
        expect((await request(facilitator.app).get(`/v2/x402/settlements/${earlyHash}`)).body).to.include({ status: "settled", txHash: earlyHash });
        const aside = await facilitator.context.ledger.setAsideRows({ chainId: 338 });
        expect(aside.filter((row) => row.kind === "settlement").map((row) => row.row.tx_hash)).to.deep.equal([settled.body.txHash]);
        // Paid again, for real this time: the chain moved the seller's money.
        const before = await chain.contract.read.balanceOf([seller.address]);
        const again = await request(facilitator.app).post("/v2/x402/settle").send(payment.body);
        expect(again.body.event).to.equal("payment.settled");
        expect(await paidOnChain(chain, again.body.txHash)).to.deep.equal({ from: buyer.address, to: seller.address, value: 1_000_000n });
        expect(await chain.contract.read.balanceOf([seller.address])).to.equal(before + 1_000_000n);
        expect((await request(facilitator.app).get(`/v2/x402/settlements/${again.body.txHash}`)).body).to.include({ status: "settled" });
        // Counted: one rewind of the index, one settlement set aside.
        const page = await facilitator.metrics.registry.metrics();
        const metric = (line: string) => Number(page.split("\n").find((l) => l.startsWith(`${line} `))?.slice(line.length + 1) ?? 0);
        expect(metric('x402_state_index_history_changes_total{network="cronos-testnet",kind="rewind"}')).to.equal(1);
        expect(metric('x402_ledger_rows_set_aside_total{network="cronos-testnet",kind="settlement"}')).to.equal(1);
      } finally {
        await facilitator.close(0);
      }
    });
  });
});
