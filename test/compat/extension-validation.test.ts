import { expect } from "chai";
import express from "express";
import {
  bazaarResourceServerExtension,
  declareDiscoveryExtension,
  validateDiscoveryExtension,
  validateDiscoveryExtensionSpec,
} from "@x402/extensions/bazaar";
import {
  appendPaymentIdentifierToExtensions,
  declarePaymentIdentifierExtension,
  extractAndValidatePaymentIdentifier,
  paymentIdentifierSchema,
  validatePaymentIdentifier,
} from "@x402/extensions/payment-identifier";
import type { PaymentPayload } from "@x402/core/types";
import { bazaarDeclarationOf, isValidBazaarDeclaration } from "../../src/protocol/bazaar.js";
import { paymentIdentifierOf } from "../../src/protocol/x402v2.js";
import { discoveryListingOf } from "../../src/facilitator/discovery.js";
import { InvalidRequirementsError, paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { decodeBase64Json, listen } from "../helpers/http.js";

// The kit's checks of the v2 extensions against `@x402/extensions`' own validators (imported here only:
// the kit does not depend on the package). The corpora hold valid declarations and one of each kind of
// invalid one; the kit must accept exactly what the package accepts, but where the package decides by
// compiling and running the schema the extension carries: the kit never runs a schema someone else wrote
// (issue 39: one doubling its work per level froze a process for hours), so it takes those few.

type Declaration = Record<string, unknown>;
const clone = <T>(value: T): T => structuredClone(value);

/** A declaration as `@x402/express` sends it for `method` on a route: declared, then enriched per request. */
function enriched(declaration: unknown, method: string, routePattern?: string, path = "/weather"): Declaration {
  const context = { method, adapter: { getPath: () => path }, ...(routePattern ? { routePattern } : {}) };
  return bazaarResourceServerExtension.enrichDeclaration!(clone(declaration), context) as Declaration;
}

const query = declareDiscoveryExtension({
  input: { city: "Oslo" },
  inputSchema: { properties: { city: { type: "string" } }, required: ["city"] },
  output: { example: { forecast: "snow" } },
}).bazaar;
const body = declareDiscoveryExtension({
  bodyType: "json",
  input: { text: "hello" },
  inputSchema: { type: "object", properties: { text: { type: "string" } } },
}).bazaar;
const mcp = declareDiscoveryExtension({
  toolName: "search",
  description: "Searches things",
  transport: "streamable-http",
  inputSchema: { type: "object", properties: { q: { type: "string" } } },
}).bazaar;

/** Changes a copy of `declaration` with `change`. */
function edited(declaration: unknown, change: (copy: { info: { input: Declaration; [key: string]: unknown }; schema?: unknown; [key: string]: unknown }) => void): Declaration {
  const copy = clone(declaration) as Parameters<typeof change>[0];
  change(copy);
  return copy;
}

const DECLARATIONS: Array<[string, unknown]> = [
  // Valid.
  ["@x402/express GET (enriched)", enriched(query, "GET")],
  ["@x402/express GET on a dynamic route (routeTemplate, pathParams)", enriched(query, "GET", "/weather/:city", "/weather/oslo")],
  ["@x402/express POST json body (enriched)", enriched(body, "POST")],
  ["@x402/extensions MCP tool", mcp],
  ["the kit's GET", bazaarDeclarationOf({ input: { city: "Oslo" }, inputSchema: { properties: { city: { type: "string" } } }, output: { example: { forecast: "snow" } } })],
  ["the kit's POST", bazaarDeclarationOf({ method: "POST", input: { text: "hi" } })],
  ["the kit's PUT form-data", bazaarDeclarationOf({ method: "PUT", bodyType: "form-data" })],
  ["a GET without a method in info, its schema not asking for one", edited(query, (d) => void ((d.schema as { properties: { input: { required: string[] } } }).properties.input.required = ["type"]))],
  ["a boolean schema (true)", edited(enriched(query, "GET"), (d) => void (d.schema = true))],
  ["a schema with a local $ref", { info: { input: { type: "http", method: "GET" } }, schema: { $defs: { i: { type: "object" } }, properties: { input: { $ref: "#/$defs/i" } } } }],
  // Invalid: each kind.
  ["no schema", edited(enriched(query, "GET"), (d) => void delete d.schema)],
  ["info violating its schema (a number where a string is asked)", edited(enriched(query, "GET"), (d) => void (d.info.input.queryParams = { city: 5 }))],
  ["info with a field its schema forbids", edited(enriched(query, "GET"), (d) => void (d.info.input.extra = true))],
  ["a GET declared without a method although its schema asks for one (not enriched)", query],
  ["GET with bodyType xml", edited(enriched(query, "GET"), (d) => void (d.info.input.bodyType = "xml"))],
  ["GET with bodyType json (not a body method)", edited(edited(enriched(query, "GET"), (d) => void (d.info.input.bodyType = "json")), (d) => void (d.schema = {}))],
  ["POST with bodyType xml", edited(enriched(body, "POST"), (d) => void (d.info.input.bodyType = "xml"))],
  ["an unknown method", edited(enriched(query, "GET"), (d) => void ((d.info.input.method = "FETCH"), (d.schema = {})))],
  ["a lower-case method", edited(enriched(query, "GET"), (d) => void ((d.info.input.method = "get"), (d.schema = {})))],
  ["MCP without toolName", edited(mcp, (d) => void ((d.info.input.toolName = undefined), delete d.info.input.toolName, (d.schema = {})))],
  ["MCP with an empty toolName", edited(mcp, (d) => void (d.info.input.toolName = ""))],
  ["MCP without inputSchema", edited(mcp, (d) => void (delete d.info.input.inputSchema, (d.schema = {})))],
  ["MCP with an unknown transport", edited(mcp, (d) => void ((d.info.input.transport = "carrier-pigeon"), (d.schema = {})))],
  ["input of type ftp", edited(enriched(query, "GET"), (d) => void ((d.info.input.type = "ftp"), (d.schema = {})))],
  ["no input", { info: { output: { type: "json" } }, schema: {} }],
  ["no info", { schema: {} }],
  ["a schema referring outside itself ($ref)", edited(enriched(query, "GET"), (d) => void (d.schema = { $ref: "https://example.com/schema.json" }))],
  ["a schema with an external $id", edited(enriched(query, "GET"), (d) => void (d.schema = { $id: "https://example.com/s", type: "object" }))],
  ["a schema that does not compile", edited(enriched(query, "GET"), (d) => void (d.schema = { type: 12 }))],
  ["a schema of another draft", edited(enriched(query, "GET"), (d) => void (d.schema = { $schema: "http://json-schema.org/draft-07/schema#", type: "object" }))],
  ["a boolean schema (false)", edited(enriched(query, "GET"), (d) => void (d.schema = false))],
  ["not an object", "bazaar"],
];

/**
 * The declarations the package refuses only by running their schema (`validateDiscoveryExtension` compiles it
 * and checks `info` against it): the kit, which runs no schema, takes them.
 */
const REFUSED_BY_RUNNING_THE_SCHEMA = new Set([
  "info violating its schema (a number where a string is asked)",
  "info with a field its schema forbids",
  "a GET declared without a method although its schema asks for one (not enriched)",
  "a schema that does not compile",
]);

/** What `@x402/extensions` accepts: the shape (`validateDiscoveryExtensionSpec`) and info against its schema (`validateDiscoveryExtension`). */
function packageAccepts(declaration: unknown): boolean {
  if (typeof declaration !== "object" || declaration === null) return false;
  const d = declaration as Parameters<typeof validateDiscoveryExtension>[0];
  return validateDiscoveryExtensionSpec(declaration as Record<string, unknown>).valid && validateDiscoveryExtension(d).valid;
}

/** A v2 settle body whose seller declares `declaration` for a resource (in its requirements' `extra`). */
function v2Body(declaration: unknown, url = "https://s.example/weather/oslo?x=1") {
  const requirements = { scheme: "exact", network: "eip155:338", asset: "0x0", amount: "1", payTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" };
  return {
    x402Version: 2,
    paymentPayload: { x402Version: 2, accepted: requirements, payload: {} },
    paymentRequirements: { ...requirements, extra: { resource: { url }, bazaar: declaration } },
  };
}

describe("x402 v2 extensions: the kit validates declarations and payment identifiers as @x402/extensions does", () => {
  it("the corpus holds both kinds: the package accepts the first ten and refuses the rest", () => {
    expect(DECLARATIONS.map(([name, d]) => [name, packageAccepts(d)])).to.deep.equal(DECLARATIONS.map(([name], i) => [name, i < 10]));
  });

  it("bazaar: the kit accepts exactly the declarations the package accepts, and catalogs exactly those, but those the package refuses only by running their schema", () => {
    const expected = DECLARATIONS.map(([name, d]) => [name, packageAccepts(d) || REFUSED_BY_RUNNING_THE_SCHEMA.has(name)]);
    expect(DECLARATIONS.filter(([name]) => REFUSED_BY_RUNNING_THE_SCHEMA.has(name)).map(([name, d]) => [name, packageAccepts(d)])).to.deep.equal(
      [...REFUSED_BY_RUNNING_THE_SCHEMA].map((name) => [name, false]),
    );
    expect(DECLARATIONS.map(([name, d]) => [name, isValidBazaarDeclaration(d)])).to.deep.equal(expected);
    expect(DECLARATIONS.map(([name, d]) => [name, discoveryListingOf(v2Body(d)) !== undefined])).to.deep.equal(expected);
  });

  it("bazaar: a valid routeTemplate names the resource (as the package keys it); an invalid one is ignored for the URL's path", () => {
    const dynamic = enriched(query, "GET", "/weather/:city", "/weather/oslo");
    expect(dynamic.routeTemplate).to.equal("/weather/:city");
    expect(discoveryListingOf(v2Body(dynamic))?.resource).to.equal("https://s.example/weather/:city");
    for (const template of ["/weather/../admin", "/weather/%2e%2e/admin", "https://evil.example/x", "weather/:city", "/a b"]) {
      expect(discoveryListingOf(v2Body({ ...dynamic, routeTemplate: template }))?.resource, template).to.equal("https://s.example/weather/oslo");
    }
    expect(discoveryListingOf(v2Body(enriched(query, "GET")))?.resource).to.equal("https://s.example/weather/oslo");
  });

  const ID = "pay_0123456789abcdef0123";
  const IDENTIFIERS: Array<[string, unknown]> = [
    // Valid.
    ["a seller's declaration echoed, no id", declarePaymentIdentifierExtension(true)],
    ["an id added by appendPaymentIdentifierToExtensions", appendPaymentIdentifierToExtensions({ "payment-identifier": declarePaymentIdentifierExtension(false) }, ID)["payment-identifier"]],
    ["info only, with an id", { info: { required: false, id: ID } }],
    ["an id of 128 characters", { info: { required: true, id: "a".repeat(128) } }],
    ["a schema that is not there (false)", { info: { required: true, id: ID }, schema: false }],
    // Invalid: each kind.
    ["an id but no required", { info: { id: ID } }],
    ["required not a boolean", { info: { required: "yes", id: ID } }],
    ["no info", { schema: paymentIdentifierSchema }],
    ["info not an object", { info: "pay" }],
    ["the extension not an object", "pay_0123456789abcdef"],
    ["the extension null", null],
    ["an id too short", { info: { required: true, id: "short" } }],
    ["an id too long", { info: { required: true, id: "a".repeat(129) } }],
    ["an id with spaces", { info: { required: true, id: "has spaces in it, sixteen+" } }],
    ["an id not a string", { info: { required: true, id: 12345678901234567890 } }],
    ["info violating the extension's schema", { info: { required: true, id: ID }, schema: { type: "object", required: ["other"] } }],
    ["a schema that does not compile", { info: { required: true, id: ID }, schema: "not a schema" }],
  ];

  /** The identifiers the package refuses only by running the extension's schema: the kit holds `info` to the fixed shape instead. */
  const SCHEMA_ONLY = IDENTIFIERS.slice(-2).map(([name]) => name);

  it("payment-identifier: the kit accepts exactly what validatePaymentIdentifier accepts, with the package's id, but what the package refuses only by running the schema", () => {
    expect(IDENTIFIERS.map(([name, e]) => [name, validatePaymentIdentifier(e).valid])).to.deep.equal(IDENTIFIERS.map(([name], i) => [name, i < 5]));
    const kit = IDENTIFIERS.map(([name, e]) => {
      const read = paymentIdentifierOf({ "payment-identifier": e });
      return [name, !(read && "error" in read), read && "id" in read ? read.id : null];
    });
    const expected = IDENTIFIERS.map(([name, e]) => {
      if (SCHEMA_ONLY.includes(name)) return [name, true, ID];
      const valid = validatePaymentIdentifier(e).valid;
      return [name, valid, valid ? extractAndValidatePaymentIdentifier({ extensions: { "payment-identifier": e } } as unknown as PaymentPayload).id : null];
    });
    expect(kit).to.deep.equal(expected);
    // What the official clients send (the package's own schema echoed, an id appended) is what the fixed shape takes.
    expect(paymentIdentifierOf(appendPaymentIdentifierToExtensions({ "payment-identifier": declarePaymentIdentifierExtension(true) }, ID))).to.deep.equal({ id: ID });
  });

  it("payment-identifier: each refusal names the field", () => {
    const field = 'paymentPayload.extensions["payment-identifier"]';
    expect(IDENTIFIERS.slice(5, -2).map(([, e]) => (paymentIdentifierOf({ "payment-identifier": e }) as { error: string }).error)).to.deep.equal([
      `${field}.info.required must be a boolean`,
      `${field}.info.required must be a boolean`,
      `${field}.info must be an object`,
      `${field}.info must be an object`,
      `${field} must be an object`,
      `${field} must be an object`,
      `${field}.info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -`,
      `${field}.info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -`,
      `${field}.info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -`,
      `${field}.info.id must be 16 to 128 characters of A-Z a-z 0-9 _ -`,
    ]);
  });
});

describe("the kit's seller declares routes as @x402/extensions accepts them", () => {
  // A 402 is answered without the facilitator: nothing listens here.
  const FACILITATOR = "http://127.0.0.1:1";
  /** The `bazaar` of a route's v2 PAYMENT-REQUIRED, and its v1 402 requirements. */
  async function offered(method: "get" | "post", handler: ReturnType<typeof requirePayment>) {
    const app = express();
    app[method]("/thing", handler, (_req, res) => void res.json({}));
    const seller = await listen(app);
    try {
      const answer = await fetch(`${seller.url}/thing`, { method: method.toUpperCase() });
      expect(answer.status).to.equal(402);
      const offer = decodeBase64Json(answer.headers.get("PAYMENT-REQUIRED")) as unknown as { extensions: { bazaar: Declaration } };
      const body = (await answer.json()) as { paymentRequirements: { outputSchema: Record<string, unknown> } };
      return { bazaar: offer.extensions.bazaar, outputSchema: body.paymentRequirements.outputSchema };
    } finally {
      await seller.close();
    }
  }
  const requirements = (discovery?: Parameters<typeof paymentRequirements>[0]["discovery"]) =>
    paymentRequirements({ network: "cronos-testnet", payTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", amount: 1_000n, ...(discovery ? { discovery } : {}) });

  it("GET (paymentRequirements({discovery})): info and schema, accepted by validateDiscoveryExtension and validateDiscoveryExtensionSpec", async () => {
    const { bazaar } = await offered("get", requirePayment(requirements({ input: { city: "Oslo" }, inputSchema: { properties: { city: { type: "string" } } }, output: { example: { forecast: "snow" } } }), { facilitatorUrl: FACILITATOR }));
    expect(bazaar.info).to.deep.equal({ input: { type: "http", method: "GET", queryParams: { city: "Oslo" } }, output: { type: "json", example: { forecast: "snow" } } });
    expect(bazaar.schema).to.be.an("object");
    expect([validateDiscoveryExtension(bazaar as never), validateDiscoveryExtensionSpec(bazaar as never)]).to.deep.equal([{ valid: true }, { valid: true }]);
  });

  it("POST (requirePayment({discovery}) on literal requirements): body and bodyType, not queryParams; accepted by the package; the v1 outputSchema says the same", async () => {
    const { bazaar, outputSchema } = await offered("post", requirePayment(requirements(), { facilitatorUrl: FACILITATOR, discovery: { method: "POST", input: { text: "hi" } } }));
    expect(bazaar.info).to.deep.equal({ input: { type: "http", method: "POST", bodyType: "json", body: { text: "hi" } } });
    expect([validateDiscoveryExtension(bazaar as never), validateDiscoveryExtensionSpec(bazaar as never)]).to.deep.equal([{ valid: true }, { valid: true }]);
    expect(outputSchema).to.deep.equal({ input: { type: "http", method: "POST", bodyType: "json", body: { text: "hi" }, discoverable: true } });
  });

  it("requirePayment({discovery}) leaves requirements that declare themselves as they are; bodyType on GET is a set-up error", async () => {
    const { bazaar } = await offered("get", requirePayment(requirements({ input: { a: "1" } }), { facilitatorUrl: FACILITATOR, discovery: { input: { b: "2" } } }));
    expect((bazaar.info as { input: Declaration }).input.queryParams).to.deep.equal({ a: "1" });
    expect(() => requirements({ bodyType: "json" })).to.throw(InvalidRequirementsError, "invalid discovery declaration: bodyType is for POST, PUT and PATCH, not GET");
    expect(() => requirePayment(requirements(), { facilitatorUrl: FACILITATOR, discovery: { method: "GET", bodyType: "text" } })).to.throw(InvalidRequirementsError);
  });
});
