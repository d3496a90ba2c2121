// The filter's side of the core's ABI (docs/abi.md): the core is compiled into this module, so its exports are
// plain function calls here. configure() applies a plugin configuration (init once per VM, the table through the
// core's own decoder, the workers, the hash root); route() writes the prompt and the request record, calls route
// and reads the decision record; the decision log (shared.ts) keeps every VM's index the same.

import {
  currentBlockSize, decisionPtr, errorDetail, hashesPtr, indexClear, indexStore, init, inputCapacity, inputPtr,
  isReady, loadTable, requestPtr, route as coreRoute, setBlockSize, setHashScheme, setLoad, setRoot, setSignals,
  setWorker,
  tableErrorPathPtr, tableErrorPtr, tableInfoPtr,
} from "../../assembly/index";
import {
  D_BLOCKS, D_DECODE, D_EFF_D, D_EFF_P, D_ISL, D_LOAD_D, D_LOAD_P, D_MATCHED_D, D_MATCHED_P, D_PATH, D_PREFILL, D_REASON, E_BAD_TABLE,
  FLAG_TEXT, OK, R_CONTEXT_TOKENS, R_FLAGS, R_LENGTH, R_MAX_TOKENS, R_OSL_HAT, R_PINNED_DECODE, R_PREV_OUTPUT_TOKENS,
  R_PROMPT_TOKENS, R_TURN, REQUEST_SLOTS, TE_COUNT, TE_EXPECTED, TE_LENGTH, TE_LIMIT, TE_PATH_LENGTH, TE_PROBLEM,
  TI_FEATURE0, TI_OSL_MODEL_FEATURES, LIMIT_MAX_INPUT_BYTES, SCHEME_LLM_D_CBOR_FNV,
} from "../../assembly/generated/abi";
import { ERROR_MESSAGES, TABLE_PROBLEM_MESSAGES } from "../../assembly/generated/messages";
import { FEATURE_NAMES } from "../../assembly/generated/names";
import { PluginConfig, WorkerEntry } from "./config";
import { Prompt } from "./openai";
import { addLoad, appendDecision, LOG_SLOTS, logHead, readDecision, readLoad, prefillsInFlight } from "./shared";

/** One routing decision, in the filter's terms. */
export class FilterDecision {
  remote: bool = false;
  decode: i32 = -1;
  prefill: i32 = -1;
  reason: i32 = 0;
  isl: f64 = 0;
  effP: f64 = 0;
  effD: f64 = 0;
  matchedDecode: f64 = 0;
  matchedPrefill: f64 = 0;
  blocks: f64 = 0;
  /** The loads a table's load bounds were checked against: the chosen prefill worker's active prefill tokens (−1
   *  when none was chosen), the chosen decode worker's active prefill + decode tokens. */
  loadPrefill: f64 = -1;
  loadDecode: f64 = 0;
  /** False when the decision log could not take this decision (contention). */
  shared: bool = true;
  /** Non-zero when routing failed: the core's error code (message in `error`). */
  code: i32 = 0;
  error: string = "";
}

export class Routing {
  config: PluginConfig = new PluginConfig();
  workers: Array<WorkerEntry> = new Array<WorkerEntry>();
  /** The init parameters of this VM's core (fixed after the first configuration). */
  private maxWorkers: i32 = 0;
  private maxPromptTokens: i32 = 0;
  private capacity: i32 = 0;
  /** osl_hat the core should see: −1 (the table's output-length model), or min(max_tokens, default) or 0. */
  private oslMode: i32 = 0;
  /** Next decision-log entry this VM applies. */
  nextSeq: u32 = 0;
  private period: f64 = -1;
  private load: StaticArray<f64> = new StaticArray<f64>(2);

  /** Applies a configuration: "" or the error line. Nothing changes unless everything is accepted. */
  /** The block-hash scheme and its root (docs/abi.md, block-hash schemes): "" or the error line. */
  private setScheme(c: PluginConfig): string {
    const llmd = c.hashScheme == "llm-d-cbor-fnv";
    const seed = Uint8Array.wrap(String.UTF8.encode(llmd ? c.hashSeed : ""));
    const xxhRoot = c.model.length > 0 || c.salt.length > 0 ? c.model + "\0" + c.salt : "";
    const model = Uint8Array.wrap(String.UTF8.encode(llmd ? c.model : xxhRoot));
    if (seed.length + model.length > inputCapacity()) return "model: too long";
    memory.copy(inputPtr(), seed.dataStart, seed.length);
    memory.copy(inputPtr() + <usize>seed.length, model.dataStart, model.length);
    const rc = llmd ? setHashScheme(SCHEME_LLM_D_CBOR_FNV, seed.length, model.length) : setRoot(model.length);
    return rc == OK ? "" : "hash_scheme: " + errorMessage(rc);
  }

  configure(c: PluginConfig): string {
    const maxPromptTokens = max(1 << 20, (c.maxBodyBytes + 3) / 4 + 4096);
    if (!isReady()) {
      const rc = init(c.maxWorkers, min(maxPromptTokens * 4, LIMIT_MAX_INPUT_BYTES), c.capacityBlocks * c.maxWorkers);
      if (rc != OK) return "core init: " + errorMessage(rc);
      this.maxWorkers = c.maxWorkers;
      this.maxPromptTokens = maxPromptTokens;
      this.capacity = c.capacityBlocks;
      this.nextSeq = catchUpFrom(logHead());
    } else if (c.maxWorkers != this.maxWorkers || maxPromptTokens != this.maxPromptTokens || c.capacityBlocks != this.capacity) {
      return "max_workers, max_body_bytes and capacity_blocks size the core once per VM: change vm_config.vm_id (or restart Envoy) to change them";
    }
    // the table first: the core keeps the active one when it rejects a new one
    const tableRc = this.loadTable(c.table);
    if (tableRc.length > 0) return tableRc;
    const bs = setBlockSize(c.blockSize);
    if (bs != OK) return "block_size: " + errorMessage(bs);
    const root = this.setScheme(c);
    if (root.length > 0) return root;
    for (let w = 0; w < c.maxWorkers; w++) {
      const entry = w < c.workers.length ? unchecked(c.workers[w]) : null;
      const before = w < this.workers.length ? unchecked(this.workers[w]) : null;
      // a slot that now names another worker forgets what the previous one cached
      if (before && (!entry || entry.id != before.id)) setWorker(w, 0, 0);
      if (entry) {
        const rc = setWorker(w, entry.role, c.capacityBlocks);
        if (rc != OK) return "workers[" + w.toString() + "]: " + errorMessage(rc);
      }
      if (!entry && !before) break;
    }
    this.workers = c.workers;
    this.config = c;
    return "";
  }

  private loadTable(table: Uint8Array): string {
    if (table.length > inputCapacity()) return "table: larger than the core's input buffer (" + inputCapacity().toString() + " bytes)";
    memory.copy(inputPtr(), table.dataStart, table.length);
    const rc = loadTable(table.length);
    if (rc == E_BAD_TABLE) return "table: " + tableError();
    if (rc != OK) return "table: " + errorMessage(rc);
    // osl_hat as dolphin serve gives it: the table's model predicts it, or min(max_tokens, default_osl_hat) when
    // the table uses osl_hat without a model, else 0
    const info = tableInfoPtr();
    let usesOslHat = false;
    for (let f = 0; f < 4; f++) {
      const feature = load<f64>(info + ((<usize>(TI_FEATURE0 + f)) << 3));
      if (feature >= 0 && <i32>feature < FEATURE_NAMES.length && FEATURE_NAMES[<i32>feature] == "osl_hat") usesOslHat = true;
    }
    this.oslMode = load<f64>(info + (<usize>TI_OSL_MODEL_FEATURES << 3)) > 0 ? -1 : usesOslHat ? 1 : 0;
    return "";
  }

  /** Applies the decision log up to its head, and the forgetting period (approximate mode); returns the entries
   *  skipped because this VM fell more than the log's length behind. */
  catchUp(nowS: f64): u32 {
    const ttl = this.config.approximateTtlS;
    const period = ttl > 0 ? Math.floor(nowS / ttl) : 0;
    if (period != this.period) {
      if (this.period >= 0) indexClear(-1);
      this.period = period;
    }
    const head = logHead();
    let skipped: u32 = 0;
    if (head - this.nextSeq > LOG_SLOTS) {
      skipped = head - this.nextSeq - LOG_SLOTS;
      this.nextSeq = head - LOG_SLOTS;
    }
    while (this.nextSeq != head) {
      const e = readDecision(this.nextSeq);
      if (!e) break; // reserved but not written yet: the next request picks it up
      this.nextSeq++;
      if (e.period != this.period) continue;
      const n = min(e.blocks, inputCapacity() >> 3);
      memory.copy(inputPtr(), e.hashes.dataStart, <usize>n << 3);
      if (e.decode >= 0) indexStore(e.decode, n);
      if (e.prefill >= 0) indexStore(e.prefill, n);
    }
    return skipped;
  }

  /** Routes one prompt; the decision is appended to the shared log. */
  route(p: Prompt): FilterDecision {
    const d = new FilterDecision();
    for (let w = 0; w < this.workers.length; w++) {
      readLoad(w, this.load);
      setLoad(w, unchecked(this.load[0]), unchecked(this.load[1]));
    }
    setSignals(prefillsInFlight(), 0);
    const input = inputPtr();
    let length: i32;
    let flags: i32 = 0;
    if (p.tokenMode) {
      length = min(p.tokens.length, this.maxPromptTokens);
      if (<i64>length * 4 > <i64>inputCapacity()) length = inputCapacity() >> 2;
      memory.copy(input, p.tokens.dataStart, <usize>length << 2);
    } else {
      length = p.text.length;
      if (length > inputCapacity()) {
        d.code = -1;
        d.error = "the prompt is larger than the core's input buffer";
        return d;
      }
      memory.copy(input, p.text.dataStart, <usize>length);
      flags = FLAG_TEXT;
    }
    const req = requestPtr();
    memory.fill(req, 0, <usize>REQUEST_SLOTS << 3);
    slot(req, R_LENGTH, length);
    slot(req, R_FLAGS, flags);
    slot(req, R_PROMPT_TOKENS, 0);
    slot(req, R_OSL_HAT, this.oslMode < 0 ? -1 : this.oslMode > 0 ? min(p.maxTokens > 0 ? p.maxTokens : Infinity, this.config.defaultOslHat) : 0);
    slot(req, R_TURN, p.turn);
    slot(req, R_PINNED_DECODE, -1);
    slot(req, R_CONTEXT_TOKENS, -1);
    slot(req, R_PREV_OUTPUT_TOKENS, 0);
    slot(req, R_MAX_TOKENS, p.maxTokens);
    const rc = coreRoute();
    if (rc != OK) {
      d.code = rc;
      d.error = errorMessage(rc);
      return d;
    }
    const out = decisionPtr();
    d.remote = value(out, D_PATH) == 1;
    d.decode = <i32>value(out, D_DECODE);
    d.prefill = <i32>value(out, D_PREFILL);
    d.reason = <i32>value(out, D_REASON);
    d.isl = value(out, D_ISL);
    d.effP = value(out, D_EFF_P);
    d.effD = value(out, D_EFF_D);
    d.matchedDecode = value(out, D_MATCHED_D);
    d.matchedPrefill = value(out, D_MATCHED_P);
    d.blocks = value(out, D_BLOCKS);
    d.loadPrefill = value(out, D_LOAD_P);
    d.loadDecode = value(out, D_LOAD_D);
    if (d.remote && d.prefill == d.decode) d.remote = false;
    // the router's own view of the caches (approximate mode), shared with every VM through the log
    const blocks = <i32>d.blocks;
    // (a decision the log could not take is stored by no VM, so the indexes stay identical; counted by the caller)
    d.shared = blocks == 0 || appendDecision(d.decode, d.remote ? d.prefill : -1, this.period, hashesPtr(), blocks);
    return d;
  }

  hold(worker: i32, prefillTokens: f64, decodeTokens: f64): void {
    if (worker >= 0 && worker < this.workers.length && (prefillTokens != 0 || decodeTokens != 0)) addLoad(worker, prefillTokens, decodeTokens);
  }
}

function catchUpFrom(head: u32): u32 {
  return head > LOG_SLOTS ? head - LOG_SLOTS : 0;
}

// @ts-ignore: decorator
@inline function slot(record: usize, index: i32, v: f64): void { store<f64>(record + (<usize>index << 3), v); }
// @ts-ignore: decorator
@inline function value(record: usize, index: i32): f64 { return load<f64>(record + (<usize>index << 3)); }

/** The spec's message for a core error code, {detail} filled as JavaScript's String(number) writes it. */
export function errorMessage(code: i32): string {
  const template = code >= 0 && code < ERROR_MESSAGES.length ? ERROR_MESSAGES[code] : "core error " + code.toString();
  return template.replace("{detail}", jsNumber(errorDetail()));
}

/** "<field path>: <problem>" from the table error record (the numeric placeholders filled). */
function tableError(): string {
  const rec = tableErrorPtr();
  const problem = <i32>value(rec, TE_PROBLEM);
  const pathLength = <i32>value(rec, TE_PATH_LENGTH);
  const pathBytes = new Uint8Array(pathLength);
  memory.copy(pathBytes.dataStart, tableErrorPathPtr(), <usize>pathLength);
  let message = problem >= 0 && problem < TABLE_PROBLEM_MESSAGES.length ? TABLE_PROBLEM_MESSAGES[problem] : "problem " + problem.toString();
  message = message.replace("{length}", jsNumber(value(rec, TE_LENGTH)))
    .replace("{limit}", jsNumber(value(rec, TE_LIMIT)))
    .replace("{expected}", jsNumber(value(rec, TE_EXPECTED)))
    .replace("{count}", jsNumber(value(rec, TE_COUNT)));
  return String.UTF8.decode(pathBytes.buffer) + ": " + message;
}

function jsNumber(v: f64): string {
  if (v == Math.floor(v) && Math.abs(v) < 1e21) return (<i64>v).toString();
  return v.toString();
}
