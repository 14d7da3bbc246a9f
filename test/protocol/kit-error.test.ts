import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "chai";
import { KitError, KitErrorOf } from "../../src/protocol/errors.js";
import { ConfigError } from "../../src/facilitator/config/error.js";
import { StartupError } from "../../src/facilitator/startup-error.js";
import { IllegalTransitionError, LedgerError } from "../../src/ledger/types.js";
import { FacilitatorError } from "../../src/seller/facilitator-client.js";
import { InvalidRequirementsError } from "../../src/seller/requirements.js";
import { PaymentError } from "../../src/buyer/errors.js";
import { FeeCapError, KeyNotLeasedError, RelaySendError } from "../../src/chain/relayer/index.js";
import { FacilitatorFault, PayerQuotaExceeded } from "../../src/settlement/faults.js";
import { Fenced } from "../../src/settlement/send.js";
import { UndecidedPaymentError } from "../../src/settlement/reconciler.js";
import { HistoryCheckError } from "../../src/state/chain-history.js";
import { InconsistentChainError } from "../../src/state/block-reader.js";
import { BackfillStartError } from "../../src/state/nonce-backfill.js";
import { UnprovenLogsError } from "../../src/state/proven-logs.js";
import { CheckFailure, CheckSkipped } from "../../src/conformance/check.js";
import { UnreachableError } from "../../src/conformance/http.js";
import { UsageError as ConformanceUsageError } from "../../src/conformance/cli.js";
import { TargetError } from "../../src/conformance/target.js";
import { UsageError as HarnessUsageError } from "../../src/harness/cli.js";
import { HarnessControlError } from "../../src/harness/control/spec.js";
import { HarnessUnavailableError } from "../../src/harness/require-hardhat.js";
import { PortInUseError } from "../../src/harness/errors.js";

const ROOT = join(import.meta.dirname, "..", "..");
const HASH = `0x${"ab".repeat(32)}` as const;
const ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" as const;

type ErrorClass = abstract new (...args: never[]) => Error;

/** One error of every class the kit throws, the class, and the code it must carry (written out: codes are stable). */
const ERRORS: ReadonlyArray<readonly [Error, ErrorClass, string]> = [
  [new ConfigError("PORT: must be an integer"), ConfigError, "config_invalid"],
  [new StartupError("cronos-testnet: RPC_URL_TESTNET answers chain 1"), StartupError, "startup_check_failed"],
  [new StartupError("PORT: 127.0.0.1:8402 is already in use", { code: "port_in_use" }), StartupError, "port_in_use"],
  [new LedgerError("unavailable", "the database did not answer"), LedgerError, "unavailable"],
  [new LedgerError("not_found", "settlement 3 does not exist"), LedgerError, "not_found"],
  [new IllegalTransitionError("settled", "failed", 3), IllegalTransitionError, "illegal_transition"],
  [new FacilitatorError({ code: "timeout", operation: "verify", details: "no answer within 5000 ms" }), FacilitatorError, "timeout"],
  [new FacilitatorError({ code: "http_status", operation: "settle", details: "busy", status: 503 }), FacilitatorError, "http_status"],
  [new InvalidRequirementsError("payTo must be an address"), InvalidRequirementsError, "invalid_requirements"],
  [new PaymentError("malformed_402", "the 402 answer is not JSON"), PaymentError, "malformed_402"],
  [new FeeCapError(2n * 10n ** 9n, 10n ** 9n), FeeCapError, "fee_cap_exceeded"],
  [new KeyNotLeasedError(ADDRESS), KeyNotLeasedError, "key_not_leased"],
  [new RelaySendError(HASH, true, { cause: new Error("socket hang up") }), RelaySendError, "relay_send_failed"],
  [new FacilitatorFault({ code: "ledger_unavailable" }), FacilitatorFault, "ledger_unavailable"],
  [new FacilitatorFault({ code: "chain_unreadable", network: "cronos-testnet", read: "state" }), FacilitatorFault, "chain_unreadable"],
  [new FacilitatorFault({ code: "fee_cap", neededWei: 2n * 10n ** 9n, capWei: 10n ** 9n }), FacilitatorFault, "fee_cap"],
  [new FacilitatorFault({ code: "not_sent", network: "cronos-testnet", why: "noKeyHolder" }), FacilitatorFault, "not_sent"],
  [new FacilitatorFault({ code: "payment_undecided", network: "cronos-testnet", reason: "the token's logs cannot be read" }), FacilitatorFault, "payment_undecided"],
  [new PayerQuotaExceeded(12), PayerQuotaExceeded, "payer_quota_exceeded"],
  [new Fenced("settlement 3 changed hands"), Fenced, "fenced"],
  [new UndecidedPaymentError("settlement 3 left undecided"), UndecidedPaymentError, "payment_undecided"],
  [new HistoryCheckError("the genesis block cannot be read"), HistoryCheckError, "history_check_failed"],
  [new InconsistentChainError("block 9 does not follow block 8", true), InconsistentChainError, "inconsistent_chain"],
  [new BackfillStartError("no start block"), BackfillStartError, "backfill_start_unknown"],
  [new UnprovenLogsError("eth_getLogs of blocks 1..9 came without the node's header of block 9"), UnprovenLogsError, "unproven_logs"],
  [new CheckFailure("expected 400, got 200"), CheckFailure, "check_failed"],
  [new CheckSkipped("needs --rpc"), CheckSkipped, "check_skipped"],
  [new UnreachableError("POST /v2/x402/verify: ECONNREFUSED"), UnreachableError, "unreachable"],
  [new ConformanceUsageError("--network: unknown"), ConformanceUsageError, "usage"],
  [new TargetError("network", "unknown network base"), TargetError, "invalid_target"],
  [new HarnessUsageError("--port: must be a port"), HarnessUsageError, "usage"],
  [new HarnessControlError(400, "kind must be one of …"), HarnessControlError, "control_refused"],
  [new HarnessUnavailableError("hardhat is not installed"), HarnessUnavailableError, "harness_unavailable"],
  [new PortInUseError(8545, "cronos-testnet-rpc", "127.0.0.1"), PortInUseError, "port_in_use"],
];

/** The GitHub anchors of a Markdown file's headings. */
function anchorsOf(file: string): Set<string> {
  const headings = readFileSync(join(ROOT, file), "utf8").match(/^#{1,6} .+$/gm) ?? [];
  return new Set(
    headings.map((heading) =>
      heading
        .replace(/^#+ /, "")
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, "")
        .replace(/ /g, "-"),
    ),
  );
}

describe("KitError: one base error with a stable code", () => {
  it("every error class the package's entry points export extends KitError", async () => {
    const entryPoints = ["index", "protocol/index", "buyer/index", "seller/index", "facilitator/index", "conformance/index", "harness/index"];
    const found = new Map<string, unknown>();
    for (const entry of entryPoints) {
      const module = (await import(`../../src/${entry}.js`)) as Record<string, unknown>;
      for (const [name, value] of Object.entries(module)) {
        if (typeof value === "function" && (value === Error || value.prototype instanceof Error)) found.set(name, value);
      }
    }
    expect([...found.keys()].sort()).to.deep.equal(
      [
        "ConfigError",
        "FacilitatorError",
        "HarnessControlError",
        "HarnessUnavailableError",
        "IllegalTransitionError",
        "InvalidRequirementsError",
        "KitError",
        "LedgerError",
        "PaymentError",
        "PortInUseError",
        "StartupError",
        "TargetError",
      ].sort(),
    );
    for (const [name, value] of found) expect(value === KitError || (value as ErrorClass).prototype instanceof KitError, name).to.equal(true);
  });

  it("each error carries its code, keeps its class's name and instanceof, and is a KitError and an Error", () => {
    for (const [error, Class, code] of ERRORS) {
      expect([error.name, (error as KitError).code], Class.name).to.deep.equal([Class.name, code]);
      expect(error, Class.name).to.be.instanceOf(Class).and.instanceOf(KitError).and.instanceOf(Error);
      expect(error.stack, Class.name).to.be.a("string").and.satisfy((stack: string) => stack.startsWith(`${Class.name}: `));
    }
    // A subclass is its parent's kind too, with its own code.
    expect(new IllegalTransitionError("failed", "settled", 1)).to.be.instanceOf(LedgerError);
  });

  it("keeps the messages and fields the classes had", () => {
    const facilitator = new FacilitatorError({ code: "http_status", operation: "settle", details: "busy", status: 503, retryAfterSeconds: 2 });
    expect([facilitator.message, facilitator.operation, facilitator.status, facilitator.retryAfterSeconds, facilitator.busy]).to.deep.equal([
      "facilitator settle failed: http_status (HTTP 503): busy",
      "settle",
      503,
      2,
      true,
    ]);
    const payment = new PaymentError("invalid_parameters", "invalid payment requirements", { details: "asset must be an address", status: 402 });
    expect([payment.message, payment.details, payment.status]).to.deep.equal(["invalid payment requirements: asset must be an address", "asset must be an address", 402]);
    const cause = new Error("ECONNREFUSED");
    const ledger = new LedgerError("unavailable", "DATABASE_URL: cannot use postgres://db/x", { cause });
    expect([ledger.message, ledger.cause]).to.deep.equal(["DATABASE_URL: cannot use postgres://db/x", cause]);
    expect(new ConfigError("API_KEYS_FILE: cannot read f", { cause }).cause).to.equal(cause);
    expect(new IllegalTransitionError("settled", "failed", 3)).to.deep.include({ from: "settled", to: "failed", message: "settlement 3: settled → failed is not allowed" });
    expect(new PortInUseError(8545, "facilitator", "127.0.0.1").message).to.equal("port 8545 on 127.0.0.1 (facilitator) is already in use");
    expect(new TargetError("network", "unknown")).to.deep.include({ option: "network", detail: "unknown", message: "network: unknown" });
    expect(new HarnessControlError(409, "busy").status).to.equal(409);
    expect(new PayerQuotaExceeded(12)).to.deep.include({ retryAfterSeconds: 12, message: "the payer's settle quota is spent; retry in 12 s" });
  });

  it("names, where it has one, a section of the docs that exists", () => {
    const withDocs = ERRORS.map(([error]) => error as KitError).filter((error) => error.docsPath !== undefined);
    expect(withDocs.map((error) => error.name).sort()).to.deep.equal(
      ["ConfigError", "FeeCapError", "HarnessControlError", "HarnessUnavailableError", "LedgerError", "LedgerError", "IllegalTransitionError", "StartupError", "StartupError"].sort(),
    );
    for (const error of withDocs) {
      const [file, anchor] = error.docsPath!.split("#");
      expect(anchorsOf(file!), `${error.name}: ${error.docsPath}`).to.include(anchor);
    }
    // Without one, there is no `docsPath` at all (not an undefined field).
    expect("docsPath" in new Fenced("x")).to.equal(false);
  });

  it("has viem's BaseError shape: a short message, details (given, or the cause's), meta messages in the message, a docs path, and walk() along the causes", () => {
    const root = new Error("connect ECONNREFUSED 127.0.0.1:5432");
    const ledger = new LedgerError("unavailable", "the ledger did not answer", { cause: root });
    expect([ledger.shortMessage, ledger.details, ledger.message]).to.deep.equal(["the ledger did not answer", "connect ECONNREFUSED 127.0.0.1:5432", "the ledger did not answer"]);
    expect(ledger.docsPath).to.equal("docs/operations.md#the-settlement-ledger-and-several-instances-as-one-service");
    // A KitError's details pass up to the error that wraps it.
    const startup = new StartupError("LEDGER_FILE: the settlement ledger cannot be opened", { cause: ledger });
    expect(startup.details).to.equal("connect ECONNREFUSED 127.0.0.1:5432");
    expect(startup.walk()).to.equal(root);
    expect(startup.walk((error) => error instanceof LedgerError)).to.equal(ledger);
    expect(startup.walk((error) => error instanceof PaymentError)).to.equal(null);
    // Given details win; meta messages follow the short message in the message, after a blank line.
    const config = new ConfigError("PORT: must be an integer", { details: 'got "eighty"', metaMessages: ["PORT=8402 listens on 8402", "PORT=0 takes any free port"] });
    expect([config.details, config.metaMessages, config.message]).to.deep.equal([
      'got "eighty"',
      ["PORT=8402 listens on 8402", "PORT=0 takes any free port"],
      "PORT: must be an integer\n\nPORT=8402 listens on 8402\nPORT=0 takes any free port",
    ]);
    // Without a cause or details there are none (no undefined fields); a one-code class is one line.
    const fenced = new Fenced("x");
    expect(["details" in fenced, "metaMessages" in fenced, fenced.walk() === fenced]).to.deep.equal([false, false, true]);
    class Refused extends KitErrorOf("Refused", "refused", "docs/facilitator.md#configuration") {}
    expect(new Refused("no")).to.deep.include({ name: "Refused", code: "refused", shortMessage: "no", docsPath: "docs/facilitator.md#configuration" }).and.be.instanceOf(KitError);
  });

  it("a code is what a program tests: a KitError of any class is told apart from a foreign error by instanceof, then by code", () => {
    const codeOf = (error: unknown) => (error instanceof KitError ? error.code : "foreign");
    expect([codeOf(new ConfigError("x")), codeOf(new Error("x")), codeOf("x")]).to.deep.equal(["config_invalid", "foreign", "foreign"]);
  });
});
