// Small helpers for validating plain data (config files, request bodies, tables, KV events): what a value is, in
// words for error messages, and whether it is a plain object. The one place values are described.

/** How a format names its values in messages. */
export interface ValueWords {
  /** a JSON object or a msgpack map */
  object: string;
  /** an array: "a list" in JSON's words, "an array" in msgpack's */
  array: string;
  /** say an array's length and that a string is one ("an array of 3", "the string \"x\""), where the type is the question */
  detailed: boolean;
}

/** Config files and request bodies: null, a list, "text", an object. */
export const JSON_WORDS: ValueWords = { object: "an object", array: "a list", detailed: false };
/** Tables and KV events: null, an array of 3, the string "text", a map, binary data (5 bytes). */
export const MSGPACK_WORDS: ValueWords = { object: "a map", array: "an array", detailed: true };

/** A short description of a value for "expected …, got <this>" messages. */
export function describeValue(v: unknown, words: ValueWords = JSON_WORDS): string {
  if (v === undefined) return "nothing";
  if (v === null) return "null";
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (typeof v === "bigint") return `the integer ${v}`;
  if (typeof v === "string") {
    const quoted = JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
    return words.detailed ? `the string ${quoted}` : quoted;
  }
  if (Array.isArray(v)) return words.detailed ? `${words.array} of ${v.length}` : words.array;
  if (v instanceof Uint8Array) return `binary data (${v.length} bytes)`;
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  if (v instanceof Map) return "a Map object";
  if (typeof v === "object") return words.object;
  return `a ${typeof v}`;
}

/** A JSON object (not null, not an array). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
