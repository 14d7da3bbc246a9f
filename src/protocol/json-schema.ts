import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";

// JSON Schema checks of what x402 v2 extensions carry (`{info, schema}`), as `@x402/extensions` makes
// them: draft 2020-12, `strict: false`, no schema fetched from anywhere.

// One instance for every check: a new one costs ~15 ms (it compiles the meta-schemas). Compiled
// schemas are not kept in it (removed after compiling), so one check never sees another's.
// A `pattern` (or `patternProperties`) is a regular expression the payer wrote: one made to backtrack
// catastrophically would hold the event loop. Node has no linear-time engine, so patterns are not
// evaluated: every string passes them (the catalog may take a declaration the package would refuse for
// a pattern alone; the catalog is discovery, never payment).
const ignoredPattern = { test: () => true };
const ajv = new Ajv2020({
  strict: false,
  allErrors: true,
  addUsedSchema: false,
  logger: false,
  code: { regExp: Object.assign(() => ignoredPattern, { code: "ignoredPattern" }) },
});
// Compiled checks by schema text: the same few declarations come back with every payment.
const compiled = new Map<string, ValidateFunction | null>();
const MAX_COMPILED = 256;

/**
 * Whether a schema refers outside itself (a `$ref` or `$id` that is not a `#` fragment): such a schema is
 * refused rather than resolved, as `@x402/extensions` refuses it.
 */
export function hasExternalSchemaReference(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(hasExternalSchemaReference);
  if (typeof node !== "object" || node === null) return false;
  for (const [key, value] of Object.entries(node)) {
    if ((key === "$ref" || key === "$id") && (typeof value !== "string" || !value.startsWith("#"))) return true;
    if (hasExternalSchemaReference(value)) return true;
  }
  return false;
}

/**
 * Whether `value` conforms to the JSON Schema `schema` (draft 2020-12). False for a schema that cannot be
 * compiled (not a schema, an unknown `$schema`) or that refers outside itself.
 */
export function conformsToSchema(schema: unknown, value: unknown): boolean {
  if (hasExternalSchemaReference(schema)) return false;
  let text: string;
  try {
    text = JSON.stringify(schema) ?? "undefined";
  } catch {
    return false;
  }
  let validate = compiled.get(text);
  if (validate === undefined) {
    validate = compile(schema);
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    compiled.set(text, validate);
  }
  return validate !== null && validate(value) === true;
}

function compile(schema: unknown): ValidateFunction | null {
  // A copy: ajv keys what it compiled by the object, and the caller's object is not ours to keep.
  const copy: unknown = schema === undefined ? undefined : JSON.parse(JSON.stringify(schema));
  try {
    return ajv.compile(copy as object);
  } catch {
    return null;
  } finally {
    if (typeof copy === "object" && copy !== null) ajv.removeSchema(copy as object);
  }
}
