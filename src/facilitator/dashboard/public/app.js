// The facilitator's dashboard: plain browser JavaScript, no build step, nothing loaded from elsewhere.
// Every value from the server is written with textContent, never parsed as HTML.
import { chartsSoon, startCharts } from "./charts.js";

const MAX_ROWS = 500;
const loadedAt = Date.now();
const $ = (id) => document.getElementById(id);

/** Creates an element with attributes and children (strings become text). */
function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "className") node.className = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function getJson(path, init) {
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
  return body;
}

const short = (hex) => (hex && hex.length > 14 ? `${hex.slice(0, 6)}…${hex.slice(-4)}` : hex || "—");

/** An address or hash, shortened, with the whole value as its accessible name and tooltip. */
function code(hex) {
  if (!hex) return el("span", { className: "muted" }, "—");
  return el("code", { title: hex, "aria-label": hex }, short(hex));
}

/** Base units (decimal string) as a decimal with `decimals`: grouped thousands, 2 to `maxFraction` fraction digits (cut, not rounded). */
function units(base, decimals, maxFraction = decimals) {
  const value = BigInt(base);
  const scale = 10n ** BigInt(decimals);
  const whole = (value / scale).toLocaleString("en-US");
  let fraction = (value % scale).toString().padStart(decimals, "0").slice(0, maxFraction).replace(/0+$/, "");
  if (fraction.length < 2) fraction = fraction.padEnd(2, "0");
  return `${whole}.${fraction}`;
}

function ago(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 90) return `${s} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

// ---- Networks ------------------------------------------------------------------------------

let networksSnapshot;
// One card per network, updated in place: a reader's selection or focus survives the refresh.
const cards = new Map();

function setText(node, text) {
  if (node.textContent !== text) node.textContent = text;
}

/** Replaces a list's items only when their text changed. */
function setItems(list, texts) {
  if (JSON.stringify([...list.children].map((li) => li.textContent)) === JSON.stringify(texts)) return;
  list.replaceChildren(...texts.map((text) => el("li", {}, text)));
}

function networkCard(network) {
  const field = {};
  const item = (term, key, className) => [el("dt", {}, term), (field[key] = el("dd", { className }))];
  field.pill = el("span", { className: "pill" });
  field.blockNumber = el("span");
  field.blockAge = el("span", { className: "muted" });
  field.relayers = el("ul", { className: "plain mono" });
  field.problems = el("ul", { className: "problems" });
  const root = el(
    "article",
    { className: "card", "aria-labelledby": `net-${network}` },
    el("h3", { id: `net-${network}` }, network, " ", field.pill),
    el(
      "dl",
      {},
      item("Chain id", "chainId"),
      item("RPC", "rpc", "mono"),
      item("USDC.e", "token", "mono"),
      item("EIP-712 domain", "domain"),
      el("dt", {}, "Latest block"),
      el("dd", {}, field.blockNumber, field.blockAge),
      (field.relayerTerm = el("dt", {}, "Relayer")),
      el("dd", {}, field.relayers),
    ),
    field.problems,
  );
  return { root, field };
}

function renderNetworks() {
  const list = $("network-list");
  const { networks, checkedAt } = networksSnapshot;
  if (cards.size !== networks.length || networks.some((n) => !cards.has(n.network))) {
    cards.clear();
    for (const n of networks) cards.set(n.network, networkCard(n.network));
    list.replaceChildren(...[...cards.values()].map((c) => c.root));
  }
  for (const n of networks) {
    const { root, field } = cards.get(n.network);
    root.classList.toggle("unhealthy", !n.ok);
    field.pill.className = n.ok ? "pill ok" : "pill bad";
    setText(field.pill, n.ok ? "healthy" : "unhealthy");
    setText(field.chainId, String(n.chainId));
    setText(field.rpc, n.rpc);
    setText(field.token, n.token);
    setText(field.domain, `name "${n.domain.name}", version "${n.domain.version}"`);
    setText(field.blockNumber, n.blockNumber === undefined ? "—" : `#${n.blockNumber}`);
    const age = n.blockAgeSeconds === undefined ? undefined : n.blockAgeSeconds + (Date.now() - checkedAt) / 1000;
    setText(field.blockAge, age === undefined ? "" : ` · ${ago(age)}`);
    setText(field.relayerTerm, n.relayers.length > 1 ? "Relayers" : "Relayer");
    setItems(field.relayers, n.relayers.map((r) => `${r.address}${r.balanceWei === undefined ? "" : ` · ${units(r.balanceWei, 18, 4)} CRO gas`}`));
    setItems(field.problems, n.problems);
  }
}

async function refreshNetworks() {
  try {
    const first = networksSnapshot === undefined;
    networksSnapshot = await getJson("dashboard/api/networks");
    // That read was also the charts' first reading of the relayers' balance: draw it now.
    if (first) chartsSoon();
    showFeedScope(networksSnapshot.feed);
    renderNetworks();
    showMode(networksSnapshot.local === true);
  } catch (error) {
    cards.clear();
    $("network-list").replaceChildren(el("p", { className: "problems" }, `Cannot read the networks: ${error.message}`));
  }
}

// ---- Live feed -----------------------------------------------------------------------------

const feedRows = new Map();
let feedEpoch;

function outcomeCell(row) {
  const lines = [];
  if (row.ok) lines.push(el("span", { className: "ok-text" }, `✓ ${row.outcome}`));
  else lines.push(el("span", { className: "tag" }, "Refused"), " ", el("span", { className: "reason" }, row.outcome));
  if (row.txHash) lines.push(el("br"), el("span", { className: "muted" }, "tx "), code(row.txHash));
  return lines;
}

function feedCells(row) {
  const time = new Date(row.time);
  // One wrapper per cell: on a narrow screen the cell is a grid of its label and this.
  const cell = (label, className, ...content) => el("td", { "data-label": label, className }, el("span", {}, ...content));
  return [
    cell("Time", undefined, el("time", { datetime: row.time, title: row.time }, time.toLocaleTimeString("en-GB"))),
    cell("Step", undefined, row.route, " ", el("span", { className: "muted dialect", title: "wire dialect" }, row.dialect)),
    cell("Network", undefined, row.network),
    cell("Payer", undefined, code(row.payer)),
    cell("Payee", undefined, code(row.payee)),
    cell("Amount (USDC.e)", "num", row.amount ?? "—"),
    cell("Outcome", "outcome", outcomeCell(row)),
    cell("Block", "num", row.block === undefined ? "—" : String(row.block)),
    cell("Gas used", "num", row.gasUsed === undefined ? "—" : Number(row.gasUsed).toLocaleString("en-US")),
    cell("Took", "num", `${Math.round(row.durationMs)} ms`),
  ];
}

function announce(row) {
  const who = row.payer ? ` from ${short(row.payer)}` : "";
  const amount = row.amount ? ` ${row.amount} USDC.e` : "";
  $("announcer").textContent = row.ok ? `${row.route} ${row.outcome}:${amount}${who}` : `${row.route} refused: ${row.outcome}`;
}

function showRow(row) {
  const body = $("feed-rows");
  const existing = feedRows.get(row.id);
  const tr = existing ?? el("tr", { "data-id": row.id });
  tr.className = row.ok ? "" : "refused";
  tr.dataset.code = row.code;
  tr.replaceChildren(...feedCells(row));
  if (!existing) {
    feedRows.set(row.id, tr);
    // Newest first: rows arrive in write order, and an enriched old row keeps its place.
    let before = body.firstElementChild;
    while (before && Number(before.dataset.id) > row.id) before = before.nextElementSibling;
    body.insertBefore(tr, before);
    if (Date.parse(row.time) >= loadedAt - 1000) announce(row);
    while (body.children.length > MAX_ROWS) {
      feedRows.delete(Number(body.lastElementChild.dataset.id));
      body.lastElementChild.remove();
    }
  }
  $("feed-empty").hidden = feedRows.size > 0;
  // A settlement moved balances and mined a block.
  if (row.route === "settle" && row.ok && !existing) {
    if (isLocal) scheduleBuyers();
    setTimeout(refreshNetworks, 1200);
  }
}

/** With API keys configured, the page (which sends none) is shown the settlements alone: it says so. */
function showFeedScope(feed) {
  if (feed !== "settled") return;
  $("feed-hint").textContent =
    "API keys are configured: this page shows settlements only (made on chain, newest first). Verify outcomes, refusals and faults need a key: GET /dashboard/api/feed with Authorization: Bearer <key>.";
  $("feed-empty").textContent = "No settlement yet.";
}

function connectFeed() {
  const connection = $("connection");
  const source = new EventSource("dashboard/events");
  source.addEventListener("open", () => {
    connection.textContent = "Live";
    connection.className = "connection live";
  });
  source.addEventListener("error", () => {
    connection.textContent = "Reconnecting to the live feed…";
    connection.className = "connection down";
  });
  source.addEventListener("outcome", (event) => {
    // The event id is "<epoch>.<rev>": a new epoch is a restarted facilitator with a fresh feed.
    const epoch = event.lastEventId.split(".")[0];
    if (feedEpoch !== undefined && epoch !== feedEpoch) {
      feedRows.clear();
      $("feed-rows").replaceChildren();
    }
    feedEpoch = epoch;
    showRow(JSON.parse(event.data));
    chartsSoon();
  });
}

// ---- Local stack: buyers and try-it --------------------------------------------------------

let isLocal = false;
let buyers = [];
let buyersTimer;

function scheduleBuyers() {
  clearTimeout(buyersTimer);
  buyersTimer = setTimeout(refreshBuyers, 150);
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  const area = el("textarea", { readonly: true, className: "visually-hidden" });
  area.value = text;
  document.body.append(area);
  area.select();
  const copied = document.execCommand("copy");
  area.remove();
  if (!copied) throw new Error("the browser refused to copy");
}

function buyerRow(b) {
  const button = el(
    "button",
    { type: "button", className: "copy", "aria-label": `Copy the private key of ${b.address} on ${b.network} (local-only test key)` },
    el("span", {}, "Copy key"),
    " ",
    el("span", { className: "tag local" }, "local-only"),
  );
  button.addEventListener("click", async () => {
    const label = button.firstChild;
    try {
      await copyText(b.privateKey);
      label.textContent = "Copied";
      $("announcer").textContent = `Copied the local-only key of ${short(b.address)}`;
    } catch (error) {
      $("announcer").textContent = `Could not copy: ${error.message}`;
    }
    setTimeout(() => (label.textContent = "Copy key"), 2000);
  });
  return el(
    "tr",
    { "data-address": b.address, "data-network": b.network },
    el("td", { "data-label": "Network" }, b.network),
    el("td", { "data-label": "Address" }, el("code", { className: "wrap" }, b.address)),
    el("td", { "data-label": "USDC.e", className: "num balance" }),
    el("td", { "data-label": "Private key" }, button),
  );
}

function renderBuyers() {
  const body = $("buyer-rows");
  const keyOf = (b) => `${b.network}:${b.address}`;
  // Rows are rebuilt only when the buyers change; balances update in place, so focus stays put.
  if (body.children.length !== buyers.length || buyers.some((b, i) => keyOf(body.children[i].dataset) !== keyOf(b))) {
    body.replaceChildren(...buyers.map(buyerRow));
  }
  buyers.forEach((b, i) => setText(body.children[i].querySelector(".balance"), units(b.balance, 6)));
  fillBuyerSelect();
}

function setOptions(select, options) {
  const chosen = select.value;
  const same = select.options.length === options.length && options.every(([value, text], i) => select.options[i].value === value && select.options[i].text === text);
  if (!same) select.replaceChildren(...options.map(([value, text]) => el("option", { value }, text)));
  if (options.some(([value]) => value === chosen)) select.value = chosen;
}

function fillBuyerSelect() {
  setOptions($("try-network"), [...new Set(buyers.map((b) => b.network))].map((n) => [n, n]));
  const network = $("try-network").value;
  setOptions(
    $("try-buyer"),
    buyers.filter((b) => b.network === network).map((b, index) => [b.address, `#${index + 1} ${short(b.address)} · ${units(b.balance, 6)} USDC.e`]),
  );
}

async function refreshBuyers() {
  try {
    buyers = (await getJson("dashboard/api/local/buyers")).buyers;
    renderBuyers();
  } catch (error) {
    $("try-result").textContent = `Cannot read the buyers: ${error.message}`;
  }
}

function describeSteps(steps) {
  return steps
    .map(({ route, answer }) => {
      if (route === "verify") return answer.isValid ? "verify: valid" : `verify: refused, ${answer.invalidReason}`;
      if (answer.event === "payment.settled") return `settle: settled in block ${answer.blockNumber} (tx ${short(answer.txHash)})`;
      return `settle: refused, ${answer.error}`;
    })
    .join(" → ");
}

function setUpTryForm() {
  const form = $("try-form");
  const result = $("try-result");
  $("try-network").addEventListener("change", fillBuyerSelect);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const scenario = event.submitter?.value ?? "pay";
    const amount = $("try-amount").value.trim();
    if (!/^\d{1,12}(\.\d{1,6})?$/.test(amount) || Number(amount) === 0) {
      result.className = "result error";
      result.textContent = "Amount: enter USDC.e above 0 with up to 6 decimals, e.g. 0.25";
      $("try-amount").focus();
      return;
    }
    const buttons = form.querySelectorAll("button");
    buttons.forEach((b) => (b.disabled = true));
    form.setAttribute("aria-busy", "true");
    result.className = "result";
    result.textContent = scenario === "pay" ? "Paying…" : "Sending…";
    try {
      const body = { network: $("try-network").value, buyer: $("try-buyer").value, amount, scenario };
      const { steps } = await getJson("dashboard/api/local/pay", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
      const refused = steps.some((s) => (s.route === "verify" ? !s.answer.isValid : s.answer.event !== "payment.settled"));
      result.className = refused ? "result error" : "result success";
      result.textContent = describeSteps(steps);
    } catch (error) {
      result.className = "result error";
      result.textContent = `Failed: ${error.message}`;
    } finally {
      buttons.forEach((b) => (b.disabled = false));
      form.removeAttribute("aria-busy");
      event.submitter?.focus();
      refreshBuyers();
    }
  });
}

// ---- Start ---------------------------------------------------------------------------------

/** Shows what this facilitator is: the local stack (buyers, try-it) or a read-only view. */
function showMode(local) {
  const mode = $("mode");
  if (!mode.hidden && local === isLocal) return;
  mode.textContent = local ? "Local stack" : "Read-only";
  mode.className = local ? "badge local" : "badge";
  mode.hidden = false;
  if (local && !isLocal) {
    isLocal = true;
    $("try").hidden = false;
    $("buyers").hidden = false;
    setUpTryForm();
    refreshBuyers();
    setInterval(refreshBuyers, 5000);
  }
}

connectFeed();
startCharts();
refreshNetworks();
setInterval(refreshNetworks, 5000);
setInterval(() => networksSnapshot && renderNetworks(), 1000);
