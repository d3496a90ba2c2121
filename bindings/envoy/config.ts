// The plugin configuration (Envoy's `configuration` StringValue, JSON), checked once in onConfigure. A bad field
// fails the plugin's start with one log line naming it, as `dolphin serve` names its config fields:
//   dolphin: plugin configuration: workers[1].role: expected "prefill", "decode" or "both", got "x"
// docs/envoy.md describes every field; src/envoy/config.ts writes this JSON for `dolphin envoy`.

import { Json, JsonType, Member } from "./json";

export class WorkerEntry {
  constructor(readonly id: string, readonly role: i32, readonly cluster: string) {}
}

export class PluginConfig {
  workers: Array<WorkerEntry> = new Array<WorkerEntry>();
  /** The table file's bytes (msgpack), decoded from base64; the core's loadTable checks them. */
  table: Uint8Array = new Uint8Array(0);
  model: string = "";
  salt: string = "";
  /** Block-hash scheme: "xxh64-chain" (the default) or "llm-d-cbor-fnv" (token prompts only; no salt). */
  hashScheme: string = "xxh64-chain";
  /** llm-d's HashSeed (vLLM's PYTHONHASHSEED), for "llm-d-cbor-fnv". */
  hashSeed: string = "";
  blockSize: i32 = 16;
  capacityBlocks: i32 = 31250;
  maxWorkers: i32 = 32;
  maxBodyBytes: i32 = 8388608;
  prefillTimeoutMs: i32 = 600000;
  fallbackLocal: bool = true;
  defaultOslHat: f64 = 256;
  /** Approximate mode's forgetting period: the index is cleared this often (0: never). */
  approximateTtlS: f64 = 300;
}

/** The parsed configuration, or the error line (`error` non-empty). */
export class ConfigResult {
  config: PluginConfig = new PluginConfig();
  error: string = "";
}

const KNOWN = [
  "workers", "table", "model", "salt", "block_size", "capacity_blocks", "max_workers", "max_body_bytes",
  "prefill_timeout_ms", "fallback_local", "default_osl_hat", "approximate_ttl_s", "hash_scheme", "hash_seed",
];

export function parseConfig(text: Uint8Array): ConfigResult {
  const r = new ConfigResult();
  const json = new Json(text);
  if (!json.isValid() || json.typeAt(json.root()) != JsonType.Object) {
    r.error = "expected a JSON object";
    return r;
  }
  const c = r.config;
  const members = json.members(json.root());
  for (let k = 0; k < members.length; k++) {
    const m = unchecked(members[k]);
    if (!KNOWN.includes(m.key)) return fail(r, m.key, "unknown key (known: " + KNOWN.join(", ") + ")");
    let e = "";
    if (m.key == "workers") e = readWorkers(json, m, c);
    else if (m.key == "table") {
      if (json.typeAt(m.start) != JsonType.String) e = "expected the table file as a base64 string, got " + shown(json, m);
      else {
        const bytes = base64(json.stringAt(m.start));
        if (bytes === null) e = "not valid base64";
        else c.table = bytes;
      }
    } else if (m.key == "model" || m.key == "salt" || m.key == "hash_seed") {
      if (json.typeAt(m.start) != JsonType.String) e = "expected a string, got " + shown(json, m);
      else if (m.key == "model") c.model = json.stringAt(m.start);
      else if (m.key == "salt") c.salt = json.stringAt(m.start);
      else c.hashSeed = json.stringAt(m.start);
    } else if (m.key == "hash_scheme") {
      const s = json.typeAt(m.start) == JsonType.String ? json.stringAt(m.start) : "";
      if (s != "xxh64-chain" && s != "llm-d-cbor-fnv") e = "expected \"xxh64-chain\" or \"llm-d-cbor-fnv\", got " + shown(json, m);
      else c.hashScheme = s;
    } else if (m.key == "fallback_local") {
      const t = json.typeAt(m.start);
      if (t != JsonType.True && t != JsonType.False) e = "expected true or false, got " + shown(json, m);
      else c.fallbackLocal = t == JsonType.True;
    } else if (m.key == "default_osl_hat" || m.key == "approximate_ttl_s") {
      const v = json.typeAt(m.start) == JsonType.Number ? json.numberAt(m.start) : NaN;
      if (!(v >= 0 && v < 1e9)) e = "expected a number ≥ 0, got " + shown(json, m);
      else if (m.key == "default_osl_hat") c.defaultOslHat = v;
      else c.approximateTtlS = v;
    } else {
      const lo: f64 = m.key == "max_body_bytes" ? 1024 : 1;
      const hi: f64 = m.key == "block_size" ? 4096 : m.key == "max_workers" ? 16384 : m.key == "max_body_bytes" ? 67108864 : 2147483647;
      const v = json.typeAt(m.start) == JsonType.Number ? json.numberAt(m.start) : NaN;
      if (!(v >= lo && v <= hi && v == Math.floor(v))) e = "expected an integer " + lo.toString() + "–" + hi.toString() + ", got " + shown(json, m);
      else if (m.key == "block_size") c.blockSize = <i32>v;
      else if (m.key == "capacity_blocks") c.capacityBlocks = <i32>v;
      else if (m.key == "max_workers") c.maxWorkers = <i32>v;
      else if (m.key == "max_body_bytes") c.maxBodyBytes = <i32>v;
      else c.prefillTimeoutMs = <i32>v;
    }
    if (e.length > 0) return fail(r, m.key, e);
  }
  if (c.workers.length == 0) return fail(r, "workers", "missing (expected at least one decode worker)");
  if (c.table.length == 0) return fail(r, "table", "missing (expected the table file as base64)");
  if (c.workers.length > c.maxWorkers) return fail(r, "max_workers", "smaller than the number of workers (" + c.workers.length.toString() + ")");
  let decode = 0;
  for (let k = 0; k < c.workers.length; k++) if ((unchecked(c.workers[k]).role & 2) != 0) decode++;
  if (decode == 0) return fail(r, "workers", "no worker has role decode or both");
  if (<f64>c.capacityBlocks * <f64>c.maxWorkers > 67108864) return fail(r, "capacity_blocks", "capacity_blocks × max_workers is over 2^26 blocks");
  if (c.hashScheme == "llm-d-cbor-fnv" && c.salt.length > 0) return fail(r, "salt", "the llm-d-cbor-fnv hash scheme has no cache salt (use hash_seed)");
  if (c.hashScheme == "xxh64-chain" && c.hashSeed.length > 0) return fail(r, "hash_seed", "only the llm-d-cbor-fnv hash scheme has one");
  return r;
}

function readWorkers(json: Json, m: Member, c: PluginConfig): string {
  if (json.typeAt(m.start) != JsonType.Array) return "expected an array of {id, role, cluster}, got " + shown(json, m);
  const items = json.items(m.start);
  for (let k = 0; k < items.length; k++) {
    const at = "[" + k.toString() + "]";
    const item = unchecked(items[k]);
    if (json.typeAt(item.start) != JsonType.Object) return at + ": expected an object {id, role, cluster}";
    const fields = json.members(item.start);
    let id = "", cluster = "", role = -1;
    for (let f = 0; f < fields.length; f++) {
      const field = unchecked(fields[f]);
      const isString = json.typeAt(field.start) == JsonType.String;
      const value = isString ? json.stringAt(field.start) : "";
      if (field.key == "id" || field.key == "cluster") {
        if (!isString || value.length == 0) return at + "." + field.key + ": expected a non-empty string, got " + shown(json, field);
        if (field.key == "id") id = value;
        else cluster = value;
      } else if (field.key == "role") {
        role = value == "prefill" ? 1 : value == "decode" ? 2 : value == "both" ? 3 : -1;
        if (!isString || role < 0) return at + ".role: expected \"prefill\", \"decode\" or \"both\", got " + shown(json, field);
      } else return at + "." + field.key + ": unknown key (known: id, role, cluster)";
    }
    if (id.length == 0) return at + ".id: missing";
    if (role < 0) return at + ".role: missing";
    if (cluster.length == 0) return at + ".cluster: missing";
    for (let j = 0; j < c.workers.length; j++) if (unchecked(c.workers[j]).id == id) return at + ".id: duplicate id \"" + id + "\"";
    c.workers.push(new WorkerEntry(id, role, cluster));
  }
  return "";
}

function fail(r: ConfigResult, field: string, message: string): ConfigResult {
  r.error = field + (message.startsWith("[") ? "" : ": ") + message;
  return r;
}

/** The value as written (cut to 40 bytes), for error messages. */
function shown(json: Json, m: Member): string {
  const end = min(m.end, m.start + 40);
  return String.UTF8.decode(json.bytes.slice(m.start, end).buffer) + (end < m.end ? "…" : "");
}

/** Standard base64 (padding optional, no whitespace), or null. */
export function base64(s: string): Uint8Array | null {
  let n = s.length;
  while (n > 0 && s.charCodeAt(n - 1) == 0x3d) n--;
  if (n % 4 == 1) return null;
  const out = new Uint8Array((n * 3) >> 2);
  let acc: u32 = 0, bits = 0, o = 0;
  for (let k = 0; k < n; k++) {
    const c = s.charCodeAt(k);
    let v: i32 = -1;
    if (c >= 0x41 && c <= 0x5a) v = c - 0x41;
    else if (c >= 0x61 && c <= 0x7a) v = c - 0x47;
    else if (c >= 0x30 && c <= 0x39) v = c + 4;
    else if (c == 0x2b) v = 62;
    else if (c == 0x2f) v = 63;
    if (v < 0) return null;
    acc = (acc << 6) | <u32>v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (o < out.length) out[o++] = <u8>(acc >> bits);
    }
  }
  return out;
}
