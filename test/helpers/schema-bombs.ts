// Helpers only: importing this file runs nothing.
// JSON Schemas made to cost a validator that runs them (issue 39): each is small enough to travel in one
// request, and each would hold the event loop of a process that compiled and ran it.

/**
 * Every level is `allOf` of two `$ref`s to the next: a validator that follows references checks the last
 * level 2^levels times (28 levels took 1.1 s under ajv, 40 more than an hour). About 80 bytes a level.
 */
export function doublingSchema(levels: number): Record<string, unknown> {
  const defs: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++) defs[`l${i}`] = { allOf: [{ $ref: `#/$defs/l${i + 1}` }, { $ref: `#/$defs/l${i + 1}` }] };
  defs[`l${levels}`] = { type: "object" };
  return { $schema: "https://json-schema.org/draft/2020-12/schema", $defs: defs, $ref: "#/$defs/l0" };
}

/** A schema `levels` deep (`{"not": {"not": …}}`), as JSON text: too deep for a recursive walk (JSON.stringify included). */
export function deepSchemaText(levels: number): string {
  return `${'{"not":'.repeat(levels)}{}${"}".repeat(levels)}`;
}

/** An `enum` of `size` long strings, none of them the value checked. */
export function hugeEnumSchema(size: number): Record<string, unknown> {
  return { properties: { id: { enum: Array.from({ length: size }, (_, i) => `pay_${String(i).padStart(12, "0")}_not_it`) } } };
}

/** A `pattern` that backtracks catastrophically on a backtracking engine, against an id made to fail it at the end. */
export const REGEX_BOMB = { properties: { id: { type: "string", pattern: "^(a|aa)+$" } } };
/** An id (valid as a payment identifier) that {@link REGEX_BOMB}'s pattern fails only after trying every split. */
export const REGEX_BOMB_ID = `${"a".repeat(60)}_`;
