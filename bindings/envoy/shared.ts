// What the filter's VMs share. Envoy runs one VM per worker thread (plus the main thread's), each with its own
// copy of the core, so each VM's prefix index would see only the requests of its own thread. Two things make them
// coherent, both in Envoy's shared data (process-wide per vm_id, compare-and-swap on every key):
//
// - A decision log: every routed prompt appends one entry (its block hashes, the decode worker, the prefill worker
//   when remote). Before routing, a VM applies every entry it has not applied yet, its own included, so all VMs
//   store the same blocks on the same workers in the same order: the index the Node proxy would have after the same
//   sequence of requests. The log is a ring of LOG_SLOTS keys and one sequence key; a writer reserves a sequence
//   number by CAS, then writes its slot; a reader stops at a slot whose stored sequence is not the one it expects
//   yet (written a moment later), and a VM that falls more than LOG_SLOTS behind skips ahead (counted).
// - Load: each worker's in-flight prefill and decode tokens, and the number of prefills in flight, as f64 values
//   updated by CAS loops; each VM reads them before routing.
//
// Approximate mode forgets: every approximate_ttl_s the index is cleared. The period is counted from the Unix
// epoch, so every VM clears at the same moments, and log entries carry their period so that an entry from before a
// clear is not replayed after it.

import { get_shared_data, set_shared_data, WasmResultValues } from "@gcoredev/proxy-wasm-sdk-as/assembly/runtime";

// @ts-ignore: decorator
@inline export const LOG_SLOTS: u32 = 4096;
// @ts-ignore: decorator
@inline const CAS_ATTEMPTS: i32 = 64;
const SEQ_KEY = "dolphin.log.seq";
const PREFILLS_KEY = "dolphin.prefills";
const ENTRY_HEADER_BYTES: i32 = 24; // u32 seq, i32 decode, i32 prefill, u32 blocks, f64 period

/** One decision as the log holds it. */
export class LogEntry {
  constructor(readonly decode: i32, readonly prefill: i32, readonly period: f64, readonly hashes: Uint8Array) {}

  get blocks(): i32 { return this.hashes.length >> 3; }
}

/** The log's next sequence number (0 when nothing was ever written). */
export function logHead(): u32 {
  const r = get_shared_data(SEQ_KEY);
  if (r.result != WasmResultValues.Ok || r.value === null || r.value!.byteLength < 4) return 0;
  return load<u32>(changetype<usize>(r.value!));
}

/** Appends a decision; false when the sequence key stayed contended (the decision is then not shared). */
export function appendDecision(decode: i32, prefill: i32, period: f64, hashes: usize, blocks: i32): bool {
  let seq: u32 = 0;
  let reserved = false;
  for (let attempt = 0; attempt < CAS_ATTEMPTS && !reserved; attempt++) {
    const r = get_shared_data(SEQ_KEY);
    const cas = r.result == WasmResultValues.Ok ? r.cas : 0;
    seq = r.result == WasmResultValues.Ok && r.value !== null && r.value!.byteLength >= 4 ? load<u32>(changetype<usize>(r.value!)) : 0;
    const next = new ArrayBuffer(4);
    store<u32>(changetype<usize>(next), seq + 1);
    reserved = set_shared_data(SEQ_KEY, next, cas) == WasmResultValues.Ok;
  }
  if (!reserved) return false;
  const entry = new ArrayBuffer(ENTRY_HEADER_BYTES + (blocks << 3));
  const at = changetype<usize>(entry);
  store<u32>(at, seq);
  store<i32>(at, decode, 4);
  store<i32>(at, prefill, 8);
  store<u32>(at, <u32>blocks, 12);
  store<f64>(at, period, 16);
  memory.copy(at + ENTRY_HEADER_BYTES, hashes, <usize>blocks << 3);
  return set_shared_data(slotKey(seq), entry, 0) == WasmResultValues.Ok;
}

/** The entry with sequence number `seq`, or null when its slot does not hold it (yet, or any more). */
export function readDecision(seq: u32): LogEntry | null {
  const r = get_shared_data(slotKey(seq));
  if (r.result != WasmResultValues.Ok || r.value === null) return null;
  const value = r.value!;
  if (value.byteLength < ENTRY_HEADER_BYTES) return null;
  const at = changetype<usize>(value);
  if (load<u32>(at) != seq) return null;
  const blocks = load<u32>(at, 12);
  if (<i64>ENTRY_HEADER_BYTES + (<i64>blocks << 3) != <i64>value.byteLength) return null;
  return new LogEntry(load<i32>(at, 4), load<i32>(at, 8), load<f64>(at, 16), Uint8Array.wrap(value, ENTRY_HEADER_BYTES, <i32>blocks << 3));
}

function slotKey(seq: u32): string {
  return "dolphin.log." + (seq % LOG_SLOTS).toString();
}

/** Creates the keys a CAS loop updates, when missing (a CAS on a missing key cannot detect a concurrent writer). */
export function initSharedKeys(workers: i32): void {
  if (get_shared_data(SEQ_KEY).result != WasmResultValues.Ok) set_shared_data(SEQ_KEY, new ArrayBuffer(4), 0);
  if (get_shared_data(PREFILLS_KEY).result != WasmResultValues.Ok) set_shared_data(PREFILLS_KEY, new ArrayBuffer(8), 0);
  for (let w = 0; w < workers; w++) {
    if (get_shared_data(loadKey(w)).result != WasmResultValues.Ok) set_shared_data(loadKey(w), new ArrayBuffer(16), 0);
  }
}

// ---- load -------------------------------------------------------------------------------------------------

/** Worker `w`'s in-flight tokens: [prefill, decode]. */
export function readLoad(w: i32, out: StaticArray<f64>): void {
  const r = get_shared_data(loadKey(w));
  if (r.result == WasmResultValues.Ok && r.value !== null && r.value!.byteLength == 16) {
    out[0] = load<f64>(changetype<usize>(r.value!));
    out[1] = load<f64>(changetype<usize>(r.value!), 8);
  } else {
    out[0] = 0;
    out[1] = 0;
  }
}

/** Adds to worker `w`'s in-flight tokens (negative to release); values never go below 0. */
export function addLoad(w: i32, prefillTokens: f64, decodeTokens: f64): void {
  casAdd(loadKey(w), prefillTokens, decodeTokens, 16);
}

export function prefillsInFlight(): f64 {
  const r = get_shared_data(PREFILLS_KEY);
  return r.result == WasmResultValues.Ok && r.value !== null && r.value!.byteLength == 8 ? load<f64>(changetype<usize>(r.value!)) : 0;
}

export function addPrefills(delta: f64): void {
  casAdd(PREFILLS_KEY, delta, 0, 8);
}

function casAdd(key: string, a: f64, b: f64, bytes: i32): void {
  for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
    const r = get_shared_data(key);
    const ok = r.result == WasmResultValues.Ok && r.value !== null && r.value!.byteLength == bytes;
    const next = new ArrayBuffer(bytes);
    const at = changetype<usize>(next);
    store<f64>(at, max(0.0, (ok ? load<f64>(changetype<usize>(r.value!)) : 0) + a));
    if (bytes == 16) store<f64>(at, max(0.0, (ok ? load<f64>(changetype<usize>(r.value!), 8) : 0) + b), 8);
    if (set_shared_data(key, next, r.result == WasmResultValues.Ok ? r.cas : 0) == WasmResultValues.Ok) return;
  }
}

function loadKey(w: i32): string {
  return "dolphin.load." + w.toString();
}
