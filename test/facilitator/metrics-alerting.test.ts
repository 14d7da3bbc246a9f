import { expect } from "chai";
import request from "supertest";
import { numberToHex, parseGwei, type Hex } from "viem";
import { createMetrics } from "../../src/facilitator/metrics/index.js";
import { SETTLE_GAS_BEFORE_FIRST } from "../../src/facilitator/metrics/runway.js";
import { makePayment, openFacilitator, sendAuthorization } from "../helpers/facilitator.js";
import { openTestLedger } from "../helpers/ledger.js";

// The metrics the alert rules and the Grafana dashboard read that the facilitator did not export before:
// the ledger answering, RPC failovers, the fee cap, what a settle costs and the relayer's runway in settles.

/** The value of one sample, exactly as exposed, or undefined when the page has no such line. */
function sample(page: string, series: string): number | undefined {
  const line = page.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("metrics for the alert rules", function () {
  this.timeout(60_000);
  let opened: Awaited<ReturnType<typeof openFacilitator>> | undefined;
  const open = async (env: Record<string, string> = {}) => (opened = await openFacilitator("cronos-testnet", { METRICS_CACHE_MS: "0", ...env }));
  afterEach(async () => {
    await opened?.facilitator.close(0);
    opened = undefined;
  });

  it("x402_ledger_up: 1 while the watched ledger answers, 0 once it cannot", async () => {
    const metrics = createMetrics({ cacheMs: 0 });
    const ledger = await openTestLedger();
    metrics.watchLedger(ledger);
    expect(sample(await metrics.registry.metrics(), "x402_ledger_up")).to.equal(1);
    expect(sample(await metrics.registry.metrics(), "x402_ledger_pending_settlements")).to.equal(0);
    await ledger.close();
    expect(sample(await metrics.registry.metrics(), "x402_ledger_up")).to.equal(0);
  });

  it("x402_rpc_endpoint_down_total: each time a URL stops answering its pings, its first ping failing included; at 0 for one that never did", async () => {
    const metrics = createMetrics();
    const pings: Array<[string, boolean]> = [
      ["a", true], ["b", false], ["a", true], ["a", false], ["b", false], ["a", false], ["c", true], ["a", true], ["b", true], ["a", false],
    ];
    for (const [endpoint, up] of pings) metrics.rpcEndpointUp("cronos-testnet", endpoint, up);
    const page = await metrics.registry.metrics();
    const down = (endpoint: string) => sample(page, `x402_rpc_endpoint_down_total{network="cronos-testnet",endpoint="${endpoint}"}`);
    expect([down("a"), down("b"), down("c")]).to.deep.equal([2, 1, 0]);
    expect(sample(page, 'x402_rpc_endpoint_up{network="cronos-testnet",endpoint="a"}')).to.equal(0);
    expect(sample(page, 'x402_rpc_endpoint_up{network="cronos-testnet",endpoint="b"}')).to.equal(1);
  });

  it("the counters the alerts read start at 0 for each network served, so a first event shows in increase()", async () => {
    const { facilitator } = await open();
    const page = await facilitator.metrics.registry.metrics();
    for (const name of ["x402_rpc_errors_total", "x402_settle_reverted_gas_total", "x402_relayer_replacements_total", "x402_relayer_drops_detected_total", "x402_relayer_rebroadcasts_total", "x402_relayer_replacements_capped_total"]) {
      expect(sample(page, `${name}{network="cronos-testnet"}`), name).to.equal(0);
    }
  });

  it("a settle's cost and the runway: 100,000 gas at the node's price before any settle; the settle's own gas at the relayer's quote after; runway = balance / cost", async () => {
    const { facilitator, chain, app } = await open();
    const runtime = facilitator.context.networks.get("cronos-testnet")!;
    const relayer = facilitator.relayers[0]!;
    const runway = `x402_relayer_runway_settles{network="cronos-testnet",relayer="${relayer}"}`;
    expect(runtime.relayer.feeStatus().neededWei).to.equal(undefined);
    let page = await facilitator.metrics.registry.metrics();
    const gasPrice = await chain.publicClient.getGasPrice();
    let balance = await chain.publicClient.getBalance({ address: relayer });
    expect(sample(page, 'x402_settle_gas{network="cronos-testnet"}')).to.equal(Number(SETTLE_GAS_BEFORE_FIRST));
    expect(sample(page, 'x402_settle_cost_wei{network="cronos-testnet"}')).to.equal(Number(SETTLE_GAS_BEFORE_FIRST * gasPrice));
    expect(sample(page, runway)).to.equal(Math.floor(Number(balance) / Number(SETTLE_GAS_BEFORE_FIRST * gasPrice)));

    const settle = await request(app).post("/v2/x402/settle").send((await makePayment(chain)).body);
    expect(settle.body.event).to.equal("payment.settled");
    // The settle's receipt is read by the first scrape after it, once, however many scrapes follow (none on its path).
    opened!.rpc.reset();
    for (let i = 0; i < 5; i++) page = await facilitator.metrics.registry.metrics();
    expect(opened!.rpc.methods().filter((method) => method === "eth_getTransactionReceipt")).to.have.length(1);
    expect(opened!.rpc.methods()).to.not.include("eth_gasPrice");
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: settle.body.txHash as Hex });
    const quoted = runtime.relayer.feeStatus().neededWei!;
    expect(quoted).to.be.a("bigint");
    balance = await chain.publicClient.getBalance({ address: relayer });
    expect(sample(page, 'x402_settle_gas{network="cronos-testnet"}')).to.equal(Number(receipt.gasUsed));
    expect(sample(page, 'x402_settle_cost_wei{network="cronos-testnet"}')).to.equal(Number(receipt.gasUsed * quoted));
    expect(sample(page, runway)).to.equal(Math.floor(Number(balance) / Number(receipt.gasUsed * quoted)));
    expect(sample(page, 'x402_fee_cap_exceeded{network="cronos-testnet"}')).to.equal(0);
  });

  it("learns no settle gas from a transaction another account sent (the payer spent its own authorization first)", async () => {
    const { facilitator, chain, app } = await open();
    const payment = await makePayment(chain);
    const theirs = await sendAuthorization(chain, payment);
    await chain.publicClient.waitForTransactionReceipt({ hash: theirs });
    const answer = await request(app).post("/v2/x402/settle").send(payment.body);
    expect([answer.body.event, answer.body.txHash]).to.deep.equal(["payment.failed", theirs]);
    expect(sample(await facilitator.metrics.registry.metrics(), 'x402_settle_gas{network="cronos-testnet"}')).to.equal(Number(SETTLE_GAS_BEFORE_FIRST));
  });

  it("x402_fee_cap_exceeded: 1 while the network asks more per gas than MAX_FEE_PER_GAS_GWEI (the settle is answered 503), 0 once it asks less", async () => {
    const { facilitator, chain, app } = await open({ MAX_FEE_PER_GAS_GWEI: "50" });
    const provider = chain.connection.provider;
    const exceeded = async () => sample(await facilitator.metrics.registry.metrics(), 'x402_fee_cap_exceeded{network="cronos-testnet"}');
    // No quote yet: nothing to compare.
    expect(await exceeded()).to.equal(undefined);
    await provider.request({ method: "hardhat_setNextBlockBaseFeePerGas", params: [numberToHex(parseGwei("100"))] });
    await provider.request({ method: "hardhat_mine", params: ["0x1"] });
    const refused = await request(app).post("/v2/x402/settle").send((await makePayment(chain)).body);
    expect(refused.status).to.equal(503);
    expect(refused.body.error).to.match(/above MAX_FEE_PER_GAS_GWEI \(50 gwei\); nothing was sent$/);
    expect(await exceeded()).to.equal(1);
    await provider.request({ method: "hardhat_setNextBlockBaseFeePerGas", params: [numberToHex(parseGwei("1"))] });
    await provider.request({ method: "hardhat_mine", params: ["0x1"] });
    const paid = await request(app).post("/v2/x402/settle").send((await makePayment(chain)).body);
    expect(paid.body.event).to.equal("payment.settled");
    expect(await exceeded()).to.equal(0);
  });
});
