import { expect } from "chai";
import express from "express";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/server";
import { bazaarResourceServerExtension, declareDiscoveryExtension, validateDiscoveryExtension, validateDiscoveryExtensionSpec, withBazaar } from "@x402/extensions/bazaar";
import { privateKeyToAccount } from "viem/accounts";
import { x402Buyer } from "../../scripts/snippets/x402-buyer.js";
import { wrapFetchWithPayment } from "../../src/buyer/index.js";
import { paymentRequirements, requirePayment } from "../../src/seller/index.js";
import { cronosPrice } from "../../src/protocol/index.js";
import type { LocalStack } from "../../src/harness/stack.js";
import { listen } from "../helpers/http.js";
import { STACK_OPTIONS, startTestStack } from "../helpers/seller.js";

/**
 * What an `@x402/*` seller puts in its route's `accepts[].extra` to be listed: the catalog lists only what the
 * seller's own requirements declare (`extra.resource`, `extra.bazaar`), never what a buyer's payment echoes.
 * The declaration is written as the package's per-request enrichment writes it for a GET (the method set).
 */
function sellerSide(url: string, description: string, declaration: unknown): Record<string, unknown> {
  const bazaar = bazaarResourceServerExtension.enrichDeclaration!(structuredClone(declaration), { method: "GET", adapter: { getPath: () => new URL(url).pathname } } as never);
  return { resource: { url, description, mimeType: "application/json" }, bazaar };
}

describe("x402 v2 bazaar: an @x402/express seller declaring discovery metadata, paid by @x402/fetch, read back with withBazaar", function () {
  this.timeout(120_000);
  let stack: LocalStack;
  let seller: Awaited<ReturnType<typeof listen>>;
  let bazaar: ReturnType<typeof withBazaar<HTTPFacilitatorClient>>["extensions"]["bazaar"];

  /**
   * An `@x402/express` seller at `url` with three paid routes. /weather declares itself for discovery on its own
   * side of the facilitator request (its requirements' `extra`: `resource` and `bazaar`, see {@link sellerSide}) as
   * well as in its 402; /echoed only in its 402 (the declaration reaches the facilitator only as the buyer echoes
   * it: never listed); /private not at all.
   */
  function discoverableSeller(facilitatorUrl: string, payTo: string, url: string) {
    const server = new x402ResourceServer(new HTTPFacilitatorClient({ url: `${facilitatorUrl}/v2/x402` }))
      .register("eip155:338", new ExactEvmScheme())
      .register("eip155:25", new ExactEvmScheme())
      .registerExtension(bazaarResourceServerExtension);
    const accepts = (extra?: Record<string, unknown>) => [
      { scheme: "exact", network: "eip155:338" as const, payTo, price: cronosPrice("eip155:338", "$0.01"), ...(extra ? { extra } : {}) },
      { scheme: "exact", network: "eip155:25" as const, payTo, price: cronosPrice("eip155:25", "$0.01"), ...(extra ? { extra } : {}) },
    ];
    const declared = declareDiscoveryExtension({
      input: { city: "Singapore" },
      inputSchema: { properties: { city: { type: "string" } }, required: ["city"] },
      output: { example: { forecast: "thunderstorms", celsius: 31 } },
    });
    const description = "Hourly weather forecast for a city";
    const app = express();
    app.use(
      paymentMiddleware(
        {
          "GET /weather": {
            accepts: accepts(sellerSide(`${url}/weather`, description, declared.bazaar)),
            description,
            mimeType: "application/json",
            extensions: { ...declared },
          },
          "GET /echoed": { accepts: accepts(), description: "Declared in the 402 only", extensions: { ...declared } },
          "GET /private": { accepts: accepts(), description: "Not listed anywhere" },
        },
        server,
      ),
    );
    for (const path of ["/weather", "/echoed"]) app.get(path, (_req, res) => void res.json({ forecast: "thunderstorms", celsius: 31 }));
    app.get("/private", (_req, res) => void res.json({ secret: true }));
    return app;
  }

  before(async () => {
    stack = await startTestStack(STACK_OPTIONS);
    let app: express.Express | undefined;
    seller = await listen((req, res) => app!(req, res));
    app = discoverableSeller(stack.facilitatorUrl, stack.seller, seller.url);
    bazaar = withBazaar(new HTTPFacilitatorClient({ url: `${stack.facilitatorUrl}/v2/x402` })).extensions.bazaar;
  });
  after(async () => {
    await seller?.close();
    await stack?.stop();
  });

  it("catalogs nothing before a payment; a 402 with a declaration is not a payment", async () => {
    expect((await fetch(`${seller.url}/weather?city=Singapore`)).status).to.equal(402);
    expect(await bazaar.listResources()).to.deep.equal({ x402Version: 2, items: [], pagination: { limit: 100, offset: 0, total: 0 } });
  });

  it("after payments on 338 and on 25, lists the resource once with both ways to pay, its description, MIME type and declaration", async () => {
    for (const network of ["eip155:338", "eip155:25"] as const) {
      const buyer = stack.networks[network === "eip155:338" ? "cronos-testnet" : "cronos-mainnet"]!.buyers[0]!;
      const response = await x402Buyer(buyer.privateKey, network)(`${seller.url}/weather?city=Singapore`);
      expect(response.status, network).to.equal(200);
      // Not declared, or declared only where the buyer echoes it: paid, never listed.
      for (const path of ["/private", "/echoed"]) expect((await x402Buyer(buyer.privateKey, network)(`${seller.url}${path}`)).status, path).to.equal(200);
    }
    const listed = await bazaar.listResources();
    expect(listed.pagination).to.deep.equal({ limit: 100, offset: 0, total: 1 });
    const [item] = listed.items;
    expect(item).to.include({ resource: `${seller.url}/weather`, type: "http", x402Version: 2, description: "Hourly weather forecast for a city", mimeType: "application/json" });
    expect(item!.lastUpdated).to.match(/^\d{4}-\d\d-\d\dT/);
    expect(item!.accepts.map((a) => [a.network, a.payTo, a.asset])).to.deep.equal([
      ["eip155:25", stack.seller, stack.networks["cronos-mainnet"]!.token],
      ["eip155:338", stack.seller, stack.networks["cronos-testnet"]!.token],
    ]);
    const declaration = item!.extensions!.bazaar as { info: { input: Record<string, unknown>; output: Record<string, unknown> } };
    expect(declaration.info.input).to.deep.include({ type: "http", method: "GET", queryParams: { city: "Singapore" } });
    expect(declaration.info.output).to.deep.equal({ type: "json", example: { forecast: "thunderstorms", celsius: 31 } });
  });

  it("filters by network, payTo, scheme, type and extension, and pages with limit and offset", async () => {
    expect((await bazaar.listResources({ network: "eip155:338" })).items).to.have.length(1);
    expect((await bazaar.listResources({ network: "eip155:1" })).items).to.have.length(0);
    expect((await bazaar.listResources({ payTo: stack.seller.toLowerCase(), scheme: "exact", type: "http", extensions: "bazaar" })).items).to.have.length(1);
    expect((await bazaar.listResources({ type: "mcp" })).items).to.have.length(0);
    expect((await bazaar.listResources({ extensions: "payment-identifier" })).items).to.have.length(0);
    expect(await bazaar.listResources({ limit: 1, offset: 1 })).to.deep.include({ items: [], pagination: { limit: 1, offset: 1, total: 1 } });
  });

  it("searches the words of the description, URL and declaration, case-insensitive; no match is an empty list", async () => {
    for (const query of ["weather", "Forecast city", "thunderstorms", "singapore"]) {
      const found = await bazaar.search({ query });
      expect(found.resources.map((r) => r.resource), query).to.deep.equal([`${seller.url}/weather`]);
      expect(found).to.deep.include({ x402Version: 2, pagination: { limit: 20, cursor: null } });
    }
    expect((await bazaar.search({ query: "stock prices" })).resources).to.deep.equal([]);
  });

  it("the kit's Cronos-dialect seller declares a route with paymentRequirements({discovery}); paid by the kit's buyer (x402Version 1), it is listed and found", async () => {
    const app = express();
    app.get(
      "/quotes",
      requirePayment(
        paymentRequirements({
          network: "cronos-testnet",
          payTo: stack.seller,
          amount: 10_000n,
          description: "Stock quotes by ticker, delayed 15 minutes",
          discovery: { input: { ticker: "CRO" }, output: { example: { ticker: "CRO", price: "0.09" } } },
        }),
        { facilitatorUrl: stack.facilitatorUrl },
      ),
      (_req, res) => void res.json({ ticker: "CRO", price: "0.09" }),
    );
    const cronosSeller = await listen(app);
    try {
      const buyer = stack.networks["cronos-testnet"]!.buyers[1]!;
      const pay = wrapFetchWithPayment(fetch, { signer: privateKeyToAccount(buyer.privateKey), maxAmount: 10_000n, networks: ["cronos-testnet"] });
      expect((await pay(`${cronosSeller.url}/quotes?ticker=CRO`)).status).to.equal(200);
      const found = await bazaar.search({ query: "stock quotes" });
      expect(found.resources.map((r) => [r.resource, r.x402Version, r.type, r.description])).to.deep.equal([
        [`${cronosSeller.url}/quotes`, 1, "http", "Stock quotes by ticker, delayed 15 minutes"],
      ]);
      // The info the route declared, with the schema @x402/extensions gives a v1 declaration it catalogs.
      expect(found.resources[0]!.extensions).to.deep.equal({
        bazaar: {
          info: { input: { type: "http", method: "GET", queryParams: { ticker: "CRO" } }, output: { type: "json", example: { ticker: "CRO", price: "0.09" } } },
          schema: {
            $schema: "https://json-schema.org/draft/2020-12/schema",
            type: "object",
            properties: { input: { type: "object" }, output: { type: "object" } },
            required: ["input"],
          },
        },
      });
      const declaration = found.resources[0]!.extensions!.bazaar as Parameters<typeof validateDiscoveryExtension>[0];
      expect([validateDiscoveryExtension(declaration), validateDiscoveryExtensionSpec(declaration as never)]).to.deep.equal([{ valid: true }, { valid: true }]);
      expect(found.resources[0]!.accepts.map((a) => [a.network, a.payTo, (a as Record<string, unknown>).maxAmountRequired])).to.deep.equal([["cronos-testnet", stack.seller, "10000"]]);
      expect((await bazaar.listResources()).pagination.total).to.equal(2);
      // Its way of paying says cronos-testnet (the Cronos dialect's name): either name finds it.
      for (const network of ["eip155:338", "cronos-testnet"]) {
        expect((await bazaar.listResources({ network })).items.map((r) => r.resource), network).to.deep.equal([`${cronosSeller.url}/quotes`, `${seller.url}/weather`]);
      }
    } finally {
      await cronosSeller.close();
    }
  });

  it("answers 400 JSON naming the parameter for bad query values", async () => {
    for (const [path, message] of [
      ["/v2/x402/discovery/resources?limit=ten", "Invalid request: limit must be a whole number"],
      ["/v2/x402/discovery/resources?limit=5000", "Invalid request: limit must be at most 1000"],
      ["/v2/x402/discovery/search", "Invalid request: query is required"],
      ["/v2/x402/discovery/search?query=%20", "Invalid request: query must not be empty"],
    ] as const) {
      const response = await fetch(`${stack.facilitatorUrl}${path}`);
      expect([response.status, await response.json()], path).to.deep.equal([400, { error: message }]);
    }
  });
  it("a dynamic @x402/express route (GET /forecast/:city) declaring its route template is cataloged once under it, whichever city was paid", async () => {
    const server = new x402ResourceServer(new HTTPFacilitatorClient({ url: `${stack.facilitatorUrl}/v2/x402` }))
      .register("eip155:338", new ExactEvmScheme())
      .registerExtension(bazaarResourceServerExtension);
    const app = express();
    const dynamic = await listen(app);
    const declared = declareDiscoveryExtension({ output: { example: { days: 10 } } });
    const description = "Ten-day forecast by city";
    app.use(
      paymentMiddleware(
        {
          "GET /forecast/:city": {
            accepts: [
              {
                scheme: "exact",
                network: "eip155:338" as const,
                payTo: stack.seller,
                price: cronosPrice("eip155:338", "$0.01"),
                extra: sellerSide(`${dynamic.url}/forecast/:city`, description, { ...declared.bazaar, routeTemplate: "/forecast/:city" }),
              },
            ],
            description,
            extensions: { ...declared },
          },
        },
        server,
      ),
    );
    app.get("/forecast/:city", (_req, res) => void res.json({ days: 10 }));
    try {
      const buyer = stack.networks["cronos-testnet"]!.buyers[2]!;
      for (const city of ["oslo", "lima"]) expect((await x402Buyer(buyer.privateKey, "eip155:338")(`${dynamic.url}/forecast/${city}`)).status, city).to.equal(200);
      const found = await bazaar.search({ query: "ten-day" });
      expect(found.resources.map((r) => r.resource)).to.deep.equal([`${dynamic.url}/forecast/:city`]);
      const declaration = found.resources[0]!.extensions!.bazaar as { routeTemplate: string; info: { input: Record<string, unknown> } };
      expect([declaration.routeTemplate, declaration.info.input.method]).to.deep.equal(["/forecast/:city", "GET"]);
    } finally {
      await dynamic.close();
    }
  });
});
