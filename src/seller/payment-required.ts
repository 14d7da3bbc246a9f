// The 402 answer: the Cronos body with the requirements, and x402 v2's offer in PAYMENT-REQUIRED.
import type { Request, Response } from "express";
import { bazaarDeclarationOf, BAZAAR, declarationOfOutputSchema, SELLER_DECLARATION } from "../protocol/bazaar.js";
import { encodeBase64Json } from "../protocol/header.js";
import { X402_VERSION } from "../protocol/reasons.js";
import type { PaymentRequirements } from "../protocol/schemas.js";
import { PAYMENT_IDENTIFIER, X402_V2_VERSION, X402V2Header, type V2PaymentRequirements } from "../protocol/x402v2.js";

/** A route's requirements as a request is answered with them. */
export interface RouteOffer {
  requirements: PaymentRequirements;
  /** Their x402 v2 form, on a Cronos network (undefined elsewhere: no `PAYMENT-REQUIRED` then). */
  v2Requirements: V2PaymentRequirements | undefined;
  /** The route's `payment-identifier` extension, if it declares one. */
  paymentIdentifier: "optional" | "required" | undefined;
}

/**
 * Answers 402 `{error, x402Version: 1, paymentRequirements, accepts: [paymentRequirements], reason?}`, and, with
 * v2 requirements, the v2 offer in `PAYMENT-REQUIRED` (its `error` is `v2Error`, else `reason`, else `error`).
 */
export function sendPaymentRequired(req: Request, res: Response, offer: RouteOffer, error: string, reason?: string, v2Error?: string): void {
  const { requirements: paymentRequirements, v2Requirements } = offer;
  if (v2Requirements) {
    const extensions = v2ExtensionsOf(paymentRequirements, offer.paymentIdentifier);
    const v2Offer = {
      x402Version: X402_V2_VERSION,
      error: v2Error ?? reason ?? error,
      resource: resourceOf(req, paymentRequirements),
      accepts: [v2Requirements],
      ...(extensions ? { extensions } : {}),
    };
    res.setHeader(X402V2Header.paymentRequired, encodeBase64Json(v2Offer));
  }
  res.status(402).json({
    error,
    x402Version: X402_VERSION,
    paymentRequirements,
    accepts: [paymentRequirements],
    ...(reason === undefined ? {} : { reason }),
  });
}

/**
 * The `extensions` of the route's x402 v2 `PAYMENT-REQUIRED`: `payment-identifier` when the route declares
 * it, `bazaar` (the discovery declaration in v2's form) when its requirements do; undefined for none.
 */
function v2ExtensionsOf(requirements: PaymentRequirements, paymentIdentifier: "optional" | "required" | undefined): Record<string, unknown> | undefined {
  const extensions: Record<string, unknown> = {};
  if (paymentIdentifier) {
    extensions[PAYMENT_IDENTIFIER] = {
      info: { required: paymentIdentifier === "required" },
      schema: {
        $schema: "https://json-schema.org/draft/2020-12/schema",
        type: "object",
        properties: { required: { type: "boolean" }, id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" } },
        required: ["required"],
      },
    };
  }
  // The v2 form of the route's declaration, with the schema its info conforms to (other facilitators refuse one without).
  const declaration = declarationOfOutputSchema((requirements as { outputSchema?: unknown }).outputSchema);
  if (declaration) extensions[BAZAAR] = bazaarDeclarationOf(declaration);
  return Object.keys(extensions).length > 0 ? extensions : undefined;
}

/**
 * The route's x402 v2 requirements as the seller sends them to the facilitator: those it offered, plus, when
 * the route declares discovery, what it declares for the catalog in their `extra` (`resource`: the
 * `PAYMENT-REQUIRED`'s `resource`; `bazaar`: its declaration). A facilitator lists only what the seller's own
 * requirements say, never what a buyer's payment echoes; the 402 itself does not carry them twice.
 */
export function facilitatorV2Requirements(req: Request, requirements: PaymentRequirements, v2Requirements: V2PaymentRequirements): V2PaymentRequirements {
  const declaration = declarationOfOutputSchema((requirements as { outputSchema?: unknown }).outputSchema);
  if (!declaration) return v2Requirements;
  const declared = { [SELLER_DECLARATION.resource]: resourceOf(req, requirements), [SELLER_DECLARATION.declaration]: bazaarDeclarationOf(declaration) };
  return { ...v2Requirements, extra: { ...v2Requirements.extra, ...declared } };
}

/** The paid resource for x402 v2's `PAYMENT-REQUIRED`: the requirements' `resource` (made absolute) or the request URL. */
export function resourceOf(req: Request, requirements: PaymentRequirements) {
  const base = `${req.protocol}://${req.get("host") ?? "localhost"}`;
  let url: string;
  try {
    url = new URL(requirements.resource ?? req.originalUrl, base).href;
  } catch {
    url = new URL(req.originalUrl, base).href;
  }
  return { url, ...(requirements.description ? { description: requirements.description } : {}), ...(requirements.mimeType ? { mimeType: requirements.mimeType } : {}) };
}
