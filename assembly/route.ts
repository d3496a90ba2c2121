// One call per request: hash the prompt, match it against every worker's prefix index, choose the decode and
// prefill workers, extract the four features, decide, optionally record the blocks as now cached (the router's
// own view, when no engine KV events feed the index), and write the decision record. No allocation.

import { hashTextBlocks, hashTokenBlocks, blockSize, scheme, TEXT_BLOCK_BYTES } from "./blocks";
import {
  D_BIT, D_BLOCKS, D_CLUSTER, D_COST_D, D_COST_P, D_DECODE, D_EFF_D, D_EFF_P, D_ISL, D_LOAD_D, D_LOAD_P, D_MATCHED_D, D_MATCHED_P, D_OSL_CLASS,
  D_OSL_HAT, D_PATH, D_PREFILL, D_REASON, D_REUSE, D_SCORE, DECISION_SLOTS, E_BAD_LENGTH, E_BAD_OSL, E_BAD_PINNED, E_BAD_TURN, E_INPUT_TOO_LARGE, E_NO_DECODE_WORKER, OK,
  E_BAD_FLAGS, FLAG_HASHES, FLAG_RECORD, FLAG_TEXT, LIMIT_MAX_TOKENS, LIMIT_TEXT_BLOCK_BYTES, LIMIT_TEXT_TOKENS_PER_BLOCK,
  R_CONTEXT_TOKENS, R_FLAGS, R_LENGTH, R_MAX_TOKENS, R_OSL_HAT, R_PINNED_DECODE, R_PREV_OUTPUT_TOKENS, R_PROMPT_TOKENS,
  R_TURN, REASON_NO_PREFILL_WORKER, REQUEST_SLOTS, ROLE_DECODE, E_TEXT_NEEDS_XXH64, SCHEME_XXH64_CHAIN,
} from "./generated/abi";
import { fail } from "./errors";
import { decide } from "./policy/decide";
import { outBit, outCluster, outReason, outScore } from "./policy/state";
import { matchPrefix } from "./prefix-index/match";
import { storeBlocks, workerInRange } from "./prefix-index/store";
import { tiersBegin, weightedCappedBlocks } from "./prefix-index/tiers";
import { lastClass, oslClasses, predictOsl } from "./osl";
import {
  chooseDecode, choosePrefill, costOf, decodeLoadOf, lastCost, prefillLoadOf, roleOf, workerSpan,
} from "./workers";

// text mode estimates tokens as bytes / 4, so a 64-byte block stands for 16 tokens
// @ts-ignore: decorator
@inline const TEXT_BYTES_PER_TOKEN: f64 = <f64>LIMIT_TEXT_BLOCK_BYTES / <f64>LIMIT_TEXT_TOKENS_PER_BLOCK;
// @ts-ignore: decorator
@inline const MAX_TOKENS: f64 = <f64>LIMIT_MAX_TOKENS;
// the largest request-record integer (length, flags, turn, worker): anything above is out of range for i32
// @ts-ignore: decorator
@inline const MAX_I32: f64 = 2147483647;

export let input: usize = 0;
export let inputBytes: i32 = 0;
export let hashes: usize = 0;
export let matched: usize = 0;
export let decision: usize = 0;
export let request: usize = 0; // f64[REQUEST_SLOTS], written by the host before route()

export function routeInit(bytes: i32, workers: i32): void {
  inputBytes = bytes;
  input = heap.alloc(<usize>bytes);
  hashes = heap.alloc(<usize>(bytes >> 2) << 3); // block size 1 gives one hash per token
  matched = heap.alloc(<usize>workers << 2);
  decision = heap.alloc(<usize>DECISION_SLOTS << 3);
  request = heap.alloc(<usize>REQUEST_SLOTS << 3);
  memory.fill(request, 0, <usize>REQUEST_SLOTS << 3);
  memory.fill(decision, 0, <usize>DECISION_SLOTS << 3);
}

// @ts-ignore: decorator
@inline function put(slot: i32, v: f64): void { store<f64>(decision + (<usize>slot << 3), v); }

/** Checks an input length against the buffer; returns OK or an error code. */
export function checkInput(n: i32, bytesPerItem: i32): i32 {
  if (n < 0) return fail(E_BAD_LENGTH, n);
  if (<i64>n * bytesPerItem > <i64>inputBytes) return fail(E_INPUT_TOO_LARGE, n);
  return OK;
}

function writeDecision(
  path: i32, decodeWorker: i32, prefillWorker: i32, isl: f64, effP: f64, effD: f64, oslHat: f64,
): void {
  put(D_PATH, path);
  put(D_BIT, outBit);
  put(D_REASON, path != outBit ? REASON_NO_PREFILL_WORKER : outReason);
  put(D_DECODE, decodeWorker);
  put(D_PREFILL, prefillWorker);
  put(D_CLUSTER, outCluster);
  put(D_ISL, isl);
  put(D_EFF_P, effP);
  put(D_EFF_D, effD);
  put(D_OSL_HAT, oslHat);
  put(D_SCORE, outScore);
}

/** Features to bit only (no hashing, matching or worker choice): the learner's and the benchmark's entry. */
export function decideFeatures(isl: f64, effP: f64, effD: f64, oslHat: f64, turn: i32, contextTokens: f64): i32 {
  if (!(isl >= 0 && isl <= MAX_TOKENS)) return fail(E_BAD_LENGTH, isl);
  if (!(effP >= 0 && effP <= isl)) return fail(E_BAD_LENGTH, effP);
  if (!(effD >= 0 && effD <= isl)) return fail(E_BAD_LENGTH, effD);
  if (!(oslHat >= 0 && oslHat <= MAX_TOKENS)) return fail(E_BAD_OSL, oslHat);
  if (turn < 0) return fail(E_BAD_TURN, turn);
  if (isNaN(contextTokens) || contextTokens > MAX_TOKENS) return fail(E_BAD_LENGTH, contextTokens);
  // no workers: no prefill load (not checked) and a decode load of 0, so load bounds never fire here
  const rc = decide(isl, effP, effD, oslHat, isl - effD, turn, contextTokens, -1, 0);
  if (rc != OK) return rc;
  // every slot written (the ones a decision without workers has none of are 0): stores, not a memory.fill call
  writeDecision(outBit, -1, -1, isl, effP, effD, oslHat);
  put(D_MATCHED_D, 0);
  put(D_MATCHED_P, 0);
  put(D_BLOCKS, 0);
  put(D_COST_D, 0);
  put(D_COST_P, 0);
  put(D_OSL_CLASS, -1);
  put(D_REUSE, 0);
  put(D_LOAD_P, -1);
  put(D_LOAD_D, 0);
  return OK;
}

/**
 * The most prompt blocks an engine serves from its prefix cache, by vLLM's rule: it always computes the prompt's
 * last token (its logits start the output), so at most isl − 1 tokens, in whole blocks, come from cache. A prompt
 * of exactly n blocks fully cached still computes its last block. Every host's cached-token features (eff_P, eff_D
 * and the decode worker's cached tokens the rules read) go through this one cap.
 */
// @ts-ignore: decorator
@inline function cacheableBlocks(isl: f64, tokensPerBlock: f64): f64 {
  return Math.floor(max(isl - 1, 0.0) / tokensPerBlock);
}

// @ts-ignore: decorator
@inline function req(slot: i32): f64 { return load<f64>(request + (<usize>slot << 3)); }

/** An integral request-record value in [lo, MAX_I32], else NaN (so callers reject it). */
function integral(v: f64, lo: f64): f64 {
  return v >= lo && v <= MAX_I32 && v == Math.floor(v) ? v : NaN;
}

/**
 * Routes one request: the host wrote the prompt into the input buffer and the request record (spec/abi.json
 * "request_record") at requestPtr(). The prompt is `length` token ids, or `length` UTF-8 bytes (FLAG_TEXT), or
 * `length` block hashes (FLAG_HASHES). `prompt_tokens` gives isl in text and hash modes (0 = derive it); `osl_hat`
 * < 0 asks the table's output-length model (fed `prev_output_tokens` of the session and the request's
 * `max_tokens`, each ≤ 0 when unknown); `pinned_decode` ≥ 0 forces the decode worker (a session's);
 * `context_tokens` < 0 means unknown. Every slot is checked here, once.
 */
export function route(): i32 {
  const lengthValue = integral(req(R_LENGTH), 0);
  if (isNaN(lengthValue)) return fail(E_BAD_LENGTH, req(R_LENGTH));
  const flagsValue = integral(req(R_FLAGS), 0);
  if (!(flagsValue <= <f64>(FLAG_TEXT | FLAG_HASHES | FLAG_RECORD))) return fail(E_BAD_FLAGS, req(R_FLAGS));
  const turnValue = integral(req(R_TURN), 0);
  if (isNaN(turnValue)) return fail(E_BAD_TURN, req(R_TURN));
  const pinnedValue = req(R_PINNED_DECODE);
  if (!(pinnedValue < 0) && isNaN(integral(pinnedValue, 0))) return fail(E_BAD_PINNED, pinnedValue);
  const n = <i32>lengthValue;
  const flags = <i32>flagsValue;
  const turn = <i32>turnValue;
  const pinnedDecode = pinnedValue < 0 ? -1 : <i32>pinnedValue;
  const promptTokens = req(R_PROMPT_TOKENS);
  let oslHat = req(R_OSL_HAT);
  const contextTokens = req(R_CONTEXT_TOKENS);
  const prevOutputTokens = req(R_PREV_OUTPUT_TOKENS);
  const maxTokens = req(R_MAX_TOKENS);
  const text = (flags & FLAG_TEXT) != 0;
  const given = (flags & FLAG_HASHES) != 0;
  let rc = checkInput(n, given ? 8 : text ? 1 : 4);
  if (rc != OK) return rc;
  if (!(promptTokens >= 0 && promptTokens <= MAX_TOKENS)) return fail(E_BAD_LENGTH, promptTokens);
  const predict = oslHat < 0;
  if (!(predict || oslHat <= MAX_TOKENS) || isNaN(oslHat) || (predict && oslClasses() == 0)) return fail(E_BAD_OSL, oslHat);
  if (!(prevOutputTokens <= MAX_TOKENS) || !(maxTokens <= MAX_TOKENS)) return fail(E_BAD_LENGTH, isNaN(prevOutputTokens) ? prevOutputTokens : maxTokens);
  if (isNaN(contextTokens) || contextTokens > MAX_TOKENS) return fail(E_BAD_LENGTH, contextTokens);
  if (pinnedDecode >= 0 && (!workerInRange(pinnedDecode) || (roleOf(pinnedDecode) & ROLE_DECODE) == 0)) {
    return fail(E_BAD_PINNED, pinnedDecode);
  }

  // 1. block hashes
  let blocks: i32;
  let blockHashes: usize = hashes;
  let tokensPerBlock: f64;
  let isl: f64;
  if (given) {
    blocks = n;
    blockHashes = input;
    tokensPerBlock = <f64>blockSize;
    isl = promptTokens > 0 ? promptTokens : <f64>n * tokensPerBlock;
  } else if (text) {
    if (scheme != SCHEME_XXH64_CHAIN) return fail(E_TEXT_NEEDS_XXH64, scheme);
    blocks = hashTextBlocks(input, n, hashes);
    tokensPerBlock = <f64>TEXT_BLOCK_BYTES / TEXT_BYTES_PER_TOKEN;
    isl = promptTokens > 0 ? promptTokens : Math.ceil(<f64>n / TEXT_BYTES_PER_TOKEN);
  } else {
    blocks = hashTokenBlocks(input, n, hashes);
    tokensPerBlock = <f64>blockSize;
    isl = <f64>n;
  }

  // 2. every worker's cached prefix
  const span = workerSpan();
  const longest = matchPrefix(blockHashes, blocks, matched, span);
  const cacheable = cacheableBlocks(isl, tokensPerBlock); // < 2^31: isl ≤ max_tokens
  tiersBegin(blockHashes, <u32>cacheable);
  const reuse = blocks > 0 ? <f64>longest / <f64>blocks : 0.0;
  if (predict) oslHat = predictOsl(isl, reuse, <f64>turn, max(prevOutputTokens, 0.0), maxTokens);

  // 3. workers around the bit
  let decodeWorker = pinnedDecode;
  let costD: f64;
  if (decodeWorker >= 0) {
    costD = costOf(decodeWorker, isl, matched, tokensPerBlock);
  } else {
    decodeWorker = chooseDecode(isl, matched, tokensPerBlock);
    costD = lastCost;
  }
  if (decodeWorker < 0) return fail(E_NO_DECODE_WORKER, 0);
  const prefillWorker = choosePrefill(isl, matched, tokensPerBlock, decodeWorker);
  const costP = prefillWorker >= 0 ? lastCost : 0.0;

  // 4. features
  const matchedD = load<u32>(matched + (<usize>decodeWorker << 2));
  const matchedP = prefillWorker >= 0 ? load<u32>(matched + (<usize>prefillWorker << 2)) : 0;
  // each at most `cacheable` blocks, a lower tier's at its weight (prefix-index/tiers.ts)
  const cachedD = weightedCappedBlocks(decodeWorker, matchedD) * tokensPerBlock;
  const cachedP = prefillWorker >= 0 ? weightedCappedBlocks(prefillWorker, matchedP) * tokensPerBlock : 0.0;
  const effD = isl - cachedD;
  const effP = isl - cachedP;

  // 5. the bit, under the chosen workers' loads
  const loadP = prefillWorker >= 0 ? prefillLoadOf(prefillWorker) : -1.0;
  const loadD = decodeLoadOf(decodeWorker);
  rc = decide(isl, effP, effD, oslHat, cachedD, turn, contextTokens, loadP, loadD);
  if (rc != OK) return rc;
  const path = prefillWorker >= 0 ? outBit : 0;

  // 6. the router's own view of the caches
  if ((flags & FLAG_RECORD) != 0 && blocks > 0) {
    storeBlocks(<u32>decodeWorker, blockHashes, blocks);
    if (path == 1) storeBlocks(<u32>prefillWorker, blockHashes, blocks);
  }

  writeDecision(path, decodeWorker, prefillWorker, isl, effP, effD, oslHat);
  put(D_MATCHED_D, matchedD);
  put(D_MATCHED_P, matchedP);
  put(D_BLOCKS, blocks);
  put(D_COST_D, costD);
  put(D_COST_P, costP);
  put(D_OSL_CLASS, predict ? lastClass : -1);
  put(D_REUSE, reuse);
  put(D_LOAD_P, loadP);
  put(D_LOAD_D, loadD);
  return OK;
}
