import { expect } from "chai";
import { PaidRoutes } from "../../src/seller/paid-routes.js";

describe("PaidRoutes: one payment, one route, in bounded memory", () => {
  it("binds a payment to the first route it is served on; another route gets that one back", () => {
    const routes = new PaidRoutes();
    expect(routes.bind("p1", "GET https://s.example/a", 2_000, 1_000)).to.equal("GET https://s.example/a");
    expect(routes.bind("p1", "GET https://s.example/b", 2_000, 1_500)).to.equal("GET https://s.example/a");
    expect(routes.bind("p1", "GET https://s.example/a", 3_000, 1_600)).to.equal("GET https://s.example/a");
    expect(routes.bind("p2", "GET https://s.example/b", 2_000, 1_700)).to.equal("GET https://s.example/b");
    expect(routes.size).to.equal(2);
  });

  it("forgets a payment once its window ended (swept a few at a time as others are bound), and keeps at most its bound", () => {
    const routes = new PaidRoutes(100);
    for (let i = 0; i < 20; i++) routes.bind(`old${i}`, "GET /a", 1_000, 0);
    // Each binding after the windows ended drops up to 8 of them.
    routes.bind("new0", "GET /b", 10_000, 5_000);
    expect(routes.size).to.equal(13);
    routes.bind("new1", "GET /b", 10_000, 5_000);
    routes.bind("new2", "GET /b", 10_000, 5_000);
    expect(routes.size).to.equal(3);
    // An ended window's payment may bind afresh (its window is over anyway: the retry window refuses it first).
    expect(routes.bind("old0", "GET /b", 10_000, 5_000)).to.equal("GET /b");
    // Past the bound, the oldest go: 150 live payments leave the last 100.
    const bounded = new PaidRoutes(100);
    for (let i = 0; i < 150; i++) bounded.bind(`p${i}`, "GET /a", 10_000, 0);
    expect(bounded.size).to.equal(100);
    expect(bounded.bind("p49", "GET /b", 10_000, 0)).to.equal("GET /b");
    expect(bounded.bind("p149", "GET /b", 10_000, 0)).to.equal("GET /a");
  });
});
