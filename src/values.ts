// Small helpers for validating plain JSON-like input (config files, request bodies): what a value is, in words for
// error messages, and whether it is a plain object.

/** A short description of a value for "expected …, got <this>" messages; `objectWord` names a JSON object. */
export function describeValue(v: unknown, objectWord = "an object"): string {
  if (v === undefined) return "nothing";
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === "object") return objectWord;
  return String(v);
}

/** A JSON object (not null, not an array). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
