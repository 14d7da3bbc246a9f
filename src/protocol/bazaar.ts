import { z } from "zod";

// The x402 `bazaar` extension (resource discovery) as `@x402/extensions` 2.27 states it: a declaration
// `{info, schema}` whose `info` says how to call the resource and conforms to `schema`. Facts read from
// that package; the kit does not need it at run time.

/** The `bazaar` extension's key in `extensions`. */
export const BAZAAR = "bazaar";

/**
 * Where x402 v2 payment requirements carry what their seller declares for the discovery catalog: `extra.resource`
 * (`{url, description?, mimeType?}`, the v2 `PAYMENT-REQUIRED`'s `resource`) and `extra.bazaar` (the
 * declaration, `{info, schema, routeTemplate?}`). The requirements are the seller's side of a verify/settle
 * request; the payment payload beside them is the buyer's, and a catalog lists nothing of it.
 */
export const SELLER_DECLARATION = { resource: "resource", declaration: BAZAAR } as const;

/** Methods whose input travels in the query string. */
export const QUERY_METHODS = ["GET", "HEAD", "DELETE"] as const;
/** Methods whose input travels in the body. */
export const BODY_METHODS = ["POST", "PUT", "PATCH"] as const;
/** How a body method's body is encoded. */
export const BODY_TYPES = ["json", "form-data", "text"] as const;
/** An MCP tool's transports. */
export const MCP_TRANSPORTS = ["streamable-http", "sse"] as const;

export type HttpMethod = (typeof QUERY_METHODS)[number] | (typeof BODY_METHODS)[number];
export type BodyType = (typeof BODY_TYPES)[number];

const isBodyMethod = (method: unknown) => (BODY_METHODS as readonly unknown[]).includes(method);

/** What the package takes for an object: anything of `typeof` object but null (arrays included). */
const anObject = z.custom<object>((value) => typeof value === "object" && value !== null, { error: "must be an object" });

/** `info.input` of an HTTP resource: `method` one of the six, `bodyType` only with a body method. */
const httpInputSchema = z.looseObject({
  type: z.literal("http"),
  method: z.enum([...QUERY_METHODS, ...BODY_METHODS], { error: `must be one of ${[...QUERY_METHODS, ...BODY_METHODS].join(", ")}` }).optional(),
  bodyType: z.enum(BODY_TYPES, { error: `must be one of ${BODY_TYPES.join(", ")}` }).optional(),
});

/** `info.input` of an MCP tool: its name and its input's JSON schema. */
const mcpInputSchema = z.looseObject({
  type: z.literal("mcp"),
  toolName: z.string({ error: "must be a non-empty string" }).min(1, { error: "must be a non-empty string" }),
  inputSchema: anObject,
  transport: z.enum(MCP_TRANSPORTS, { error: `must be one of ${MCP_TRANSPORTS.join(", ")}` }).optional(),
});

/**
 * A `bazaar` declaration's shape, by `@x402/extensions`' `validateDiscoveryExtensionSpec`: `info.input` of
 * type `http` (method and bodyType rules) or `mcp` (toolName, inputSchema), and a `schema`. What
 * {@link isValidBazaarDeclaration} further asks of the schema is fixed code too: it is never run.
 */
export const bazaarDeclarationSchema = z
  .looseObject({
    info: z.looseObject({
      input: z.discriminatedUnion("type", [httpInputSchema, mcpInputSchema], { error: 'type must be "http" or "mcp"' }),
    }),
    schema: z.union([anObject, z.boolean()], { error: "is required (a JSON schema of info)" }),
    routeTemplate: z.unknown().optional(),
  })
  .superRefine((declaration, context) => {
    const input = declaration.info.input;
    if (input.type === "http" && input.bodyType !== undefined && input.method !== undefined && !isBodyMethod(input.method)) {
      context.addIssue({ code: "custom", path: ["info", "input", "bodyType"], message: `is set but method ${input.method} is not a body method (POST, PUT, PATCH)` });
    }
  });
export type BazaarDeclaration = z.output<typeof bazaarDeclarationSchema>;

/** A declaration larger than this (as JSON) is not one the kit takes: a catalog is not a store for anyone's blobs. */
export const MAX_DECLARATION_BYTES = 16 * 1024;
/** How deep a declaration may nest (a schema of a nested body fits easily); checked before anything walks it. */
export const MAX_DECLARATION_DEPTH = 64;
/** The one JSON Schema dialect a declaration's `schema` may name (`@x402/extensions` compiles 2020-12 only). */
const DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema";

/**
 * Whether a `bazaar` declaration is one the kit takes, by fixed code in time linear in its size: nested at
 * most {@link MAX_DECLARATION_DEPTH} levels and at most {@link MAX_DECLARATION_BYTES} of JSON (both measured
 * before anything else walks it), the package's shape ({@link bazaarDeclarationSchema}), and a `schema` that
 * is not `false`, names no dialect but 2020-12 and refers to nothing outside itself (a `$ref` or `$id` that
 * is not a `#` fragment), as the package refuses those.
 *
 * The schema is never compiled or run: whether `info` conforms to it is not asked (the package's
 * `validateDiscoveryExtension` asks it by running the schema, and a schema doubling its work per level froze
 * a process for hours, issue 39). A declaration whose `info` its own schema would refuse is therefore taken;
 * its schema is kept as data, as its author wrote it.
 */
export function isValidBazaarDeclaration(declaration: unknown): declaration is BazaarDeclaration {
  if (!nestsWithin(declaration, MAX_DECLARATION_DEPTH) || (JSON.stringify(declaration)?.length ?? 0) > MAX_DECLARATION_BYTES) return false;
  const parsed = bazaarDeclarationSchema.safeParse(declaration);
  if (!parsed.success) return false;
  const { schema } = parsed.data;
  if (schema === false) return false;
  if (schema === true) return true;
  const dialect = (schema as { $schema?: unknown }).$schema;
  return (dialect === undefined || dialect === DRAFT_2020_12) && !refersOutside(schema);
}

/**
 * Whether a schema refers outside itself: a `$ref` or `$id` anywhere in it that is not a string starting
 * with `#`. Walked without recursion, each node once (the caller bounded its depth and size).
 */
function refersOutside(schema: object): boolean {
  const stack: unknown[] = [schema];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (typeof node !== "object" || node === null) continue;
    for (const [key, value] of Object.entries(node)) {
      if ((key === "$ref" || key === "$id") && (typeof value !== "string" || !value.startsWith("#"))) return true;
      if (typeof value === "object" && value !== null) stack.push(value);
    }
  }
  return false;
}

/**
 * Whether a JSON value nests objects and arrays at most `maxDepth` levels deep (a scalar is depth 0), found
 * without recursion: a payer's value nested thousands deep would overflow the stack of any recursive walk
 * (`JSON.stringify` included) before a size check could refuse it.
 */
export function nestsWithin(value: unknown, maxDepth: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [node, depth] = next;
    if (typeof node !== "object" || node === null) continue;
    if (depth + 1 > maxDepth) return false;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
    }
  }
  return true;
}

const ROUTE_TEMPLATE = /^\/[a-zA-Z0-9_/:.\-~%]+$/;

/**
 * Whether a declaration's `routeTemplate` (`/weather/:city`) may name the resource, as `@x402/extensions`'
 * `isValidRouteTemplate` decides: a path of safe characters that, decoded (at most five times), has no
 * `..` and no `://`.
 */
export function isValidRouteTemplate(value: unknown): value is string {
  if (typeof value !== "string" || !ROUTE_TEMPLATE.test(value)) return false;
  let decoded = value;
  for (let pass = 0; ; pass++) {
    if (pass === 5) return false;
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      return false;
    }
    if (next === decoded) break;
    decoded = next;
  }
  return !decoded.includes("..") && !decoded.includes("://");
}

/** What a paid HTTP route tells the discovery catalog about itself (`@x402/extensions`' `declareDiscoveryExtension`, HTTP form). */
export interface DiscoveryDeclaration {
  /** Default GET. POST, PUT and PATCH take their input as a body. */
  method?: HttpMethod;
  /** An example of the input: query parameters, or body fields for a body method. */
  input?: Record<string, unknown>;
  /** A JSON schema of the input (e.g. `{properties: {city: {type: "string"}}, required: ["city"]}`). */
  inputSchema?: Record<string, unknown>;
  /** How a body method's body is encoded; default `json`. Only with POST, PUT or PATCH. */
  bodyType?: BodyType;
  /** What an answer looks like: an example (listed when given), and a JSON schema of it. */
  output?: { example?: unknown; schema?: Record<string, unknown> };
}

/**
 * The `bazaar` declaration of an HTTP route, as `@x402/extensions`' `declareDiscoveryExtension` writes it
 * with the method set (as its server extension sets it per request): `info` (method, `queryParams` or
 * `body` with `bodyType`, `output`) and the `schema` it conforms to.
 *
 * @throws {RangeError} for `bodyType` with a method that takes no body.
 */
export function bazaarDeclarationOf(declaration: DiscoveryDeclaration): { info: Record<string, unknown>; schema: Record<string, unknown> } {
  const method = declaration.method ?? "GET";
  const body = isBodyMethod(method);
  if (!body && declaration.bodyType !== undefined) throw new RangeError(`bodyType is for POST, PUT and PATCH, not ${method}`);
  const input = declaration.input ?? {};
  const inputSchema = declaration.inputSchema ?? { properties: {} };
  const example = declaration.output?.example;
  const output = example !== undefined && example !== null ? declaration.output : undefined;
  return {
    info: {
      input: body ? { type: "http", method, bodyType: declaration.bodyType ?? "json", body: input } : { type: "http", method, queryParams: input },
      ...(output ? { output: { type: "json", example: output.example } } : {}),
    },
    schema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: {
        input: {
          type: "object",
          properties: {
            type: { type: "string", const: "http" },
            method: { type: "string", enum: [method] },
            ...(body ? { bodyType: { type: "string", enum: [...BODY_TYPES] }, body: inputSchema } : { queryParams: { type: "object", ...inputSchema } }),
          },
          required: body ? ["type", "method", "bodyType", "body"] : ["type", "method"],
          additionalProperties: false,
        },
        ...(output ? { output: { type: "object", properties: { type: { type: "string" }, example: { type: "object", ...(output.schema ?? {}) } }, required: ["type"] } } : {}),
      },
      required: ["input"],
    },
  };
}

/**
 * The x402 v1 form of a route's declaration, the payment requirements' `outputSchema` (what the Cronos
 * dialect carries): `input` with `discoverable: true`, `queryParams` or `body` with `bodyType`; `output`.
 */
export function outputSchemaOf(declaration: DiscoveryDeclaration): Record<string, unknown> {
  const { info } = bazaarDeclarationOf(declaration);
  const input = info.input as Record<string, unknown>;
  return {
    input: { ...input, discoverable: true, ...(declaration.inputSchema ? { inputSchema: declaration.inputSchema } : {}) },
    ...(declaration.output ? { output: { type: "json", ...declaration.output } } : {}),
  };
}

/**
 * The declaration a v1 `outputSchema` makes (the kit's {@link outputSchemaOf}, or a seller's own), for the
 * x402 v2 offer; undefined unless its `input` is `discoverable: true` with an HTTP method, if any, the
 * package knows.
 */
export function declarationOfOutputSchema(outputSchema: unknown): DiscoveryDeclaration | undefined {
  if (!isRecord(outputSchema) || !isRecord(outputSchema.input) || outputSchema.input.discoverable !== true) return undefined;
  const { input, output } = outputSchema;
  const method = input.method === undefined ? "GET" : typeof input.method === "string" ? input.method.toUpperCase() : undefined;
  if (!method || !(isBodyMethod(method) || (QUERY_METHODS as readonly string[]).includes(method))) return undefined;
  const fields = isBodyMethod(method) ? input.body : input.queryParams;
  const bodyType = isBodyMethod(method) && (BODY_TYPES as readonly unknown[]).includes(input.bodyType) ? (input.bodyType as BodyType) : undefined;
  return {
    method: method as HttpMethod,
    ...(isRecord(fields) ? { input: fields } : {}),
    ...(isRecord(input.inputSchema) ? { inputSchema: input.inputSchema } : {}),
    ...(bodyType ? { bodyType } : {}),
    ...(isRecord(output)
      ? { output: { ...(output.example !== undefined ? { example: output.example } : {}), ...(isRecord(output.schema) ? { schema: output.schema } : {}) } }
      : {}),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
