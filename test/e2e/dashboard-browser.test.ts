import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import hre from "hardhat";
import { chromium, type Browser, type Page } from "playwright-core";
import { VerifyReason } from "../../src/protocol/reasons.js";
import { localAccount } from "../../src/harness/accounts.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { ROOT } from "../helpers/processes.js";
import { balanceOfData, rpc } from "../helpers/rpc.js";
import { startTestStack } from "../helpers/seller.js";
import { skipBecause } from "../helpers/skip.js";

// The system Chromium (Debian package `chromium`; .ci/run installs it). Playwright's own browser
// download cannot work offline, so none is used.
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Where the screenshots of each state go (git-ignored). */
const SHOTS = join(ROOT, "test-output", "dashboard");

const BUYER = localAccount(2);
const SELLER = localAccount(1).address;

describe("e2e: the dashboard in a real browser (headless Chromium on a local stack)", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  let browser: Browser;
  let page: Page;
  const requested: string[] = [];
  /** The wall clock's minute (in seconds) when the suite began: the charts' current minute is not before it. */
  let firstMinute = 0;

  const onChain = async (address: string) => {
    const network = stack.networks["cronos-testnet"]!;
    return BigInt(await rpc<string>(network.rpcUrl, "eth_call", [{ to: network.token, data: balanceOfData(address) }, "latest"]));
  };
  const shot = (name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  // Functions passed to the page run there; the project compiles without the DOM library, hence `(globalThis as any)`.
  const cellText = (row: string, column: number) => page.locator(`${row} td:nth-child(${column})`).innerText();

  before(async function () {
    if (!existsSync(CHROMIUM)) skipBecause(this, `no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set CHROMIUM_PATH); .ci/run installs it`);
    firstMinute = Math.floor(Date.now() / 60_000) * 60;
    mkdirSync(SHOTS, { recursive: true });
    console.log(`      screenshots: ${SHOTS}`);
    stack = await startTestStack({ hre, port: 0, rpcPorts: { "cronos-testnet": 0 }, networks: ["cronos-testnet"], buyers: 2 });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-default-apps", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, reducedMotion: "reduce" });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: stack.facilitatorUrl });
    page = await context.newPage();
    page.on("request", (req) => requested.push(req.url()));
    page.on("pageerror", (error) => requested.push(`pageerror: ${error.message}`));
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it("shows the network, the funded buyers with their balances and an empty feed", async () => {
    await page.goto(stack.dashboardUrl!);
    await page.locator("#buyer-rows tr").nth(1).waitFor();
    await page.getByText("Live", { exact: true }).waitFor();
    const card = await page.locator("#network-list article").innerText();
    const network = stack.networks["cronos-testnet"]!;
    for (const fact of ["cronos-testnet", "healthy", "338", network.rpcUrl, network.token, 'name "Bridged USDC (Stargate)", version "1"', stack.relayer]) {
      expect(card).to.include(fact);
    }
    expect(await page.locator("#buyer-rows .balance").allInnerTexts()).to.deep.equal(["1,000.00", "1,000.00"]);
    expect(await page.locator("#feed-empty").isVisible()).to.equal(true);
    await shot("1-loaded");
  });

  it("copies a buyer's key with the local-only button", async () => {
    const button = page.getByRole("button", { name: `Copy the private key of ${BUYER.address} on cronos-testnet (local-only test key)` });
    expect(await button.innerText()).to.match(/Copy key\s+local-only/i);
    await button.click();
    expect(await page.evaluate(() => (globalThis as any).navigator.clipboard.readText())).to.equal(BUYER.privateKey);
  });

  it("pays from the try-it panel with the keyboard: verify and settle rows appear with tx, block and gas; the balance drops on chain and in the page", async () => {
    await page.locator("#try-amount").focus();
    await page.keyboard.press("ControlOrMeta+A");
    await page.keyboard.type("0.25");
    await page.keyboard.press("Enter");
    const settled = 'tr[data-code="settled"]';
    // The settled row is written again once its receipt is read: wait for the block.
    await page.waitForFunction((selector) => /\d/.test((globalThis as any).document.querySelector(`${selector} td:nth-child(8)`)?.textContent ?? ""), settled);

    const txHash = (await page.locator(`${settled} td:nth-child(7) code`).getAttribute("title"))!;
    const receipt = await rpc<{ blockNumber: string; gasUsed: string; status: string }>(stack.networks["cronos-testnet"]!.rpcUrl, "eth_getTransactionReceipt", [txHash]);
    expect(receipt.status).to.equal("0x1");
    expect(await page.locator(`${settled} td:nth-child(4) code`).getAttribute("title")).to.equal(BUYER.address);
    expect(await page.locator(`${settled} td:nth-child(5) code`).getAttribute("title")).to.equal(SELLER);
    expect(await cellText(settled, 2)).to.match(/^settle\s+cronos$/);
    expect(await page.locator(`${settled} .dialect`).innerText()).to.equal("cronos");
    expect(await cellText(settled, 3)).to.equal("cronos-testnet");
    expect(await cellText(settled, 6)).to.equal("0.25");
    expect(await page.locator(`${settled} td:nth-child(7) .ok-text`).innerText()).to.equal("✓ settled");
    expect(await cellText(settled, 8)).to.equal(String(Number(receipt.blockNumber)));
    expect(await cellText(settled, 9)).to.equal(Number(receipt.gasUsed).toLocaleString("en-US"));
    expect(await page.locator('tr[data-code="valid"] td:nth-child(7)').innerText()).to.equal("✓ valid");
    expect(await page.locator("#try-result").innerText()).to.match(/^verify: valid → settle: settled in block \d+ \(tx 0x[0-9a-f]{4}…[0-9a-f]{4}\)$/);

    expect(await onChain(BUYER.address)).to.equal(999_750_000n);
    expect(await onChain(SELLER)).to.equal(250_000n);
    await page.locator(`#buyer-rows tr[data-address="${BUYER.address}"] .balance`, { hasText: "999.75" }).waitFor();
    await shot("2-paid");
  });

  it("provokes each refusal: the rows stand out with their exact reasons, and no USDC.e moves", async () => {
    const cases = [
      { button: "Expired authorization", code: "expired", reason: VerifyReason.expired },
      { button: "Wrong amount", code: "amount", reason: VerifyReason.invalidAmount("250000") },
      { button: "Replay the last payment", code: "used", reason: VerifyReason.alreadyUsed },
    ];
    for (const { button, code, reason } of cases) {
      await page.getByRole("button", { name: button }).click();
      const row = page.locator(`tr[data-code="${code}"]`);
      await row.waitFor();
      expect(await row.getAttribute("class")).to.equal("refused");
      expect(await row.locator(".tag").innerText()).to.match(/^refused$/i);
      expect(await row.locator(".reason").innerText()).to.equal(reason);
      expect(await page.locator("#try-result").innerText()).to.equal(`verify: refused, ${reason}`);
    }
    expect(await page.locator("tr.refused").count()).to.equal(3);
    expect(await onChain(BUYER.address)).to.equal(999_750_000n);
    await shot("3-refused");
  });

  it("draws the last hour from that traffic: the charts' points are the verifies, settles, gas and balance that happened", async () => {
    const network = stack.networks["cronos-testnet"]!;
    const txHash = (await page.locator('tr[data-code="settled"] td:nth-child(7) code').getAttribute("title"))!;
    const receipt = await rpc<{ gasUsed: string; effectiveGasPrice: string }>(network.rpcUrl, "eth_getTransactionReceipt", [txHash]);
    const balanceWei = BigInt(await rpc<string>(network.rpcUrl, "eth_getBalance", [stack.relayer, "latest"]));
    const feeWei = BigInt(receipt.gasUsed) * BigInt(receipt.effectiveGasPrice);
    // The page reads the hour again after each outcome and the balance with the networks: wait for the chart
    // instances to hold the traffic and the balance as the chain has it now (fails loudly at the deadline).
    // (Functions that run in the page define no named helpers: the test's compiler would wrap them in its own.)
    await page.waitForFunction(
      ({ balance }) => {
        const charts = (globalThis as any).dashboardCharts?.get("cronos-testnet");
        if (!charts) return false;
        const [settled, refused, gas] = [charts.counts.data[3], charts.counts.data[2], charts.gas.data[1]].map((values: Array<number | null>) => values.reduce((sum: number, v) => sum + (v ?? 0), 0));
        return settled === 1 && refused === 3 && gas! > 0 && charts.balance.data[1].at(-1) === balance;
      },
      { balance: Number(balanceWei) / 1e18 },
      { timeout: 30_000 },
    );
    const drawn = await page.evaluate(() => {
      const charts = (globalThis as any).dashboardCharts.get("cronos-testnet");
      const [counts, latency, gas, balance] = ["counts", "latency", "gas", "balance"].map((key) => charts[key].data.map((values: unknown[]) => [...values]));
      // The pixel at the settled point's centre, as the canvas has it: the chart drew it, not just holds it.
      const plot = charts.counts;
      const at = plot.data[3].findIndex((v: number) => v > 0);
      const x = Math.round(plot.valToPos(plot.data[0][at], "x", true));
      const y = Math.round(plot.valToPos(plot.data[3][at], "y", true));
      const pixel = [...plot.ctx.getImageData(x, y, 1, 1).data];
      return { counts, latency, gas, balance, labels: plot.series.map((s: { label?: string }) => s.label ?? null), pixel };
    });
    const sum = (values: Array<number | null>) => values.reduce<number>((total, v) => total + (v ?? 0), 0);

    // One x per minute of the last hour, the current one last.
    const minutes = drawn.counts[0] as number[];
    expect(minutes).to.have.length(60);
    expect(minutes.slice(1).map((minute, i) => minute - minutes[i]!)).to.deep.equal(Array(59).fill(60));
    expect(minutes.at(-1)).to.be.within(firstMinute, Math.floor(Date.now() / 60_000) * 60);
    // Per minute by outcome: the one paid verify and settle, the three refused verifies, no fault.
    expect(drawn.labels).to.deep.equal(["Time", "verify ✓", "verify refused", "settle ✓", "settle refused", "faults (5xx)"]);
    expect(drawn.counts.slice(1).map(sum)).to.deep.equal([1, 3, 1, 0, 0]);
    expect(drawn.pixel).to.deep.equal([23, 107, 44, 255]);
    // Latency: p50 and p99 where there were answers, nothing where there were none.
    const [, verifyP50, verifyP99, settleP50, settleP99] = drawn.latency as Array<Array<number | null>>;
    for (const [i, verifies] of (drawn.counts[1] as number[]).entries()) {
      const answered = verifies + (drawn.counts[2] as number[])[i]! > 0;
      expect(verifyP50![i] !== null, `verify p50 at minute ${i}`).to.equal(answered);
      if (answered) expect(verifyP99![i]!).to.be.at.least(verifyP50![i]!).and.greaterThan(0);
    }
    expect(settleP50!.filter((v) => v !== null)).to.have.length(1);
    expect(settleP99!.filter((v) => v !== null)[0]).to.be.greaterThan(0);
    // Gas: exactly the settle transaction's, and its cost in CRO.
    expect(sum(drawn.gas[1])).to.equal(Number(receipt.gasUsed));
    expect(sum(drawn.gas[2])).to.equal(Number(feeWei) / 1e18);
    // Balance and runway: the relayer's balance now, in settles at that transaction's cost.
    expect(drawn.balance[1].at(-1)).to.equal(Number(balanceWei) / 1e18);
    expect(drawn.balance[2].at(-1)).to.equal(Math.floor(Number(balanceWei) / Number(feeWei)));
    expect(await page.locator('#chart-list [data-chart="counts"] .chart-summary').innerText()).to.equal("Last hour: 1 verified, 3 refused; 1 settled, 0 refused; 0 faults.");
    expect(await page.locator('#chart-list [data-chart="balance"] .chart-summary').innerText()).to.match(
      new RegExp(`^Balance [\\d,.]+ CRO: about ${Math.floor(Number(balanceWei) / Number(feeWei)).toLocaleString("en-US")} settles at [\\d.e-]+ CRO each \\(the hour's average\\)\\.$`),
    );
    const path = join(SHOTS, "charts.png");
    await page.locator("#charts").screenshot({ path });
    console.log(`      charts screenshot: ${path}`);
  });

  it("keeps the feed across a reload", async () => {
    const before = await page.locator("#feed-rows tr").allInnerTexts();
    expect(before).to.have.length(5);
    await page.reload();
    await page.locator("#feed-rows tr").nth(4).waitFor();
    expect(await page.locator("#feed-rows tr").allInnerTexts()).to.deep.equal(before);
    await shot("4-reloaded");
  });

  it("is readable on a narrow screen: no sideways scrolling, each row a labelled card", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth)).to.be.at.most(390);
    const label = await page.locator("#feed-rows tr").first().locator("td").first().evaluate((td) => (globalThis as any).getComputedStyle(td, "::before").content);
    expect(label).to.equal('"Time"');
    // The charts: one per row, each as wide as its card and within the screen, redrawn at that size.
    await page.waitForFunction(() => Object.values((globalThis as any).dashboardCharts.get("cronos-testnet")).every((chart: any) => chart.width <= 370));
    const boxes = await page.locator("#chart-list .chart").evaluateAll((figures) => figures.map((figure) => figure.getBoundingClientRect()).map(({ left, right, top }) => ({ left, right, top })));
    expect(boxes).to.have.length(4);
    for (const box of boxes) expect(box.left >= 0 && box.right <= 390, JSON.stringify(box)).to.equal(true);
    expect(new Set(boxes.map((box) => box.top)).size, "one chart per row").to.equal(4);
    const widths = await page.evaluate(() => Object.values((globalThis as any).dashboardCharts.get("cronos-testnet")).map((chart: any) => chart.width));
    for (const width of widths) expect(width).to.be.within(200, 370);
    expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth)).to.be.at.most(390);
    await shot("5-narrow");
    const path = join(SHOTS, "charts-phone.png");
    await page.locator("#charts").screenshot({ path });
    console.log(`      charts screenshot (phone): ${path}`);
  });

  it("loaded nothing from another origin and raised no script error", () => {
    expect(requested.length).to.be.greaterThan(0);
    expect(requested.filter((url) => !url.startsWith(`${stack.facilitatorUrl}/`))).to.deep.equal([]);
  });

  it("with API keys configured, says that its feed shows settlements only", async () => {
    const keyed = await startTestStack({ hre, port: 0, rpcPorts: { "cronos-testnet": 0 }, networks: ["cronos-testnet"], buyers: 1, env: { API_KEYS: "seller-a-0123456789abcdef" } });
    const other = await browser.newPage();
    try {
      await other.goto(keyed.dashboardUrl!);
      await other.getByText("Live", { exact: true }).waitFor();
      await other.getByText("API keys are configured", { exact: false }).waitFor();
      expect(await other.locator("#feed-hint").innerText()).to.equal(
        "API keys are configured: this page shows settlements only (made on chain, newest first). Verify outcomes, refusals and faults need a key: GET /dashboard/api/feed with Authorization: Bearer <key>.",
      );
      expect(await other.locator("#feed-empty").innerText()).to.equal("No settlement yet.");
      // The charts show the settlements' side only: no latency chart, and the relayer's balance from the first networks read.
      await other.locator('#chart-list [data-chart="balance"] .chart-summary', { hasText: /^Balance 10,000 CRO; runway unknown until a settle's cost is seen\.$/ }).waitFor();
      expect(await other.locator("#chart-list .chart").evaluateAll((figures) => figures.map((figure) => figure.getAttribute("data-chart")))).to.deep.equal(["counts", "gas", "balance"]);
      expect(await other.locator('#chart-list [data-chart="counts"] .chart-summary').innerText()).to.equal("Last hour: 0 settled. Verifies, refusals and latency are shown with an API key only.");
      await other.screenshot({ path: join(SHOTS, "6-keyed.png"), fullPage: true });
    } finally {
      await other.close();
      await keyed.stop();
    }
  });
});
