// One call per request: hash the prompt, match it against every worker's prefix index, choose the decode and
// prefill workers, extract the four features, decide, optionally record the blocks as now cached (the router's
// own view, when no engine KV events feed the index), and write the decision record. No allocation.

import { hashTextBlocks, hashTokenBlocks, blockSize, TEXT_BLOCK_BYTES } from "./blocks";
import {
  E_BAD_LENGTH, E_BAD_OSL, E_BAD_PINNED, E_BAD_TURN, E_INPUT_TOO_LARGE, E_NO_DECODE_WORKER, fail, OK,
} from "./errors";
import {
  decide, outBit, outCluster, outReason, outScore, REASON_NO_PREFILL_WORKER,
} from "./policy";
import { matchPrefix, storeBlocks } from "./prefix-index";
import { lastClass, oslClasses, predictOsl } from "./osl";
import {
  chooseDecode, choosePrefill, costOf, lastCost, prefillLoadOf, roleOf, ROLE_DECODE, workerSpan,
} from "./workers";
import { workerInRange } from "./prefix-index";

// route flags
export const FLAG_TEXT: i32 = 1; // input is UTF-8 bytes, hashed in 64-byte blocks
export const FLAG_HASHES: i32 = 2; // input is already block hashes (u64 each), e.g. from a trace
export const FLAG_RECORD: i32 = 4; // store the blocks on the chosen worker(s) after deciding

// text mode estimates tokens as bytes / 4, so a 64-byte block stands for 16 tokens
// @ts-ignore: decorator
@inline const TEXT_BYTES_PER_TOKEN: f64 = 4;
// @ts-ignore: decorator
@inline const MAX_TOKENS: f64 = 1073741824; // 2^30

// decision record: f64 slots
export const D_PATH: i32 = 0;
export const D_BIT: i32 = 1;
export const D_REASON: i32 = 2;
export const D_DECODE: i32 = 3;
export const D_PREFILL: i32 = 4;
export const D_CLUSTER: i32 = 5;
export const D_ISL: i32 = 6;
export const D_EFF_P: i32 = 7;
export const D_EFF_D: i32 = 8;
export const D_OSL_HAT: i32 = 9;
export const D_MATCHED_D: i32 = 10;
export const D_MATCHED_P: i32 = 11;
export const D_BLOCKS: i32 = 12;
export const D_SCORE: i32 = 13;
export const D_COST_D: i32 = 14;
export const D_COST_P: i32 = 15;
export const D_OSL_CLASS: i32 = 16; // predicted output-length class (−1 when the caller gave osl_hat)
export const D_REUSE: i32 = 17; // longest cached prefix on any worker / blocks
export const DECISION_SLOTS: i32 = 18;

export let input: usize = 0;
export let inputBytes: i32 = 0;
export let hashes: usize = 0;
export let matched: usize = 0;
export let decision: usize = 0;

export function routeInit(bytes: i32, workers: i32): void {
  inputBytes = bytes;
  input = heap.alloc(<usize>bytes);
  hashes = heap.alloc(<usize>(bytes >> 2) << 3); // block size 1 gives one hash per token
  matched = heap.alloc(<usize>workers << 2);
  decision = heap.alloc(<usize>DECISION_SLOTS << 3);
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
  const rc = decide(isl, effP, effD, oslHat, isl - effD, turn, contextTokens, -1);
  if (rc != OK) return rc;
  memory.fill(decision, 0, <usize>DECISION_SLOTS << 3);
  writeDecision(outBit, -1, -1, isl, effP, effD, oslHat);
  put(D_OSL_CLASS, -1);
  return OK;
}

/**
 * Routes one request whose prompt the host wrote into the input buffer: `n` token ids, or `n` UTF-8 bytes
 * (FLAG_TEXT), or `n` block hashes (FLAG_HASHES). `promptTokens` gives isl in text and hash modes (0 = derive
 * it); `oslHat` < 0 asks the table's output-length model (fed `prevOutputTokens` of the session and the request's
 * `maxTokens`, each ≤ 0 when unknown); `pinnedDecode` ≥ 0 forces the decode worker (a session's);
 * `contextTokens` < 0 means unknown.
 */
export function route(
  n: i32, flags: i32, promptTokens: f64, oslHat: f64, turn: i32, pinnedDecode: i32, contextTokens: f64,
  prevOutputTokens: f64, maxTokens: f64,
): i32 {
  const text = (flags & FLAG_TEXT) != 0;
  const given = (flags & FLAG_HASHES) != 0;
  let rc = checkInput(n, given ? 8 : text ? 1 : 4);
  if (rc != OK) return rc;
  if (!(promptTokens >= 0 && promptTokens <= MAX_TOKENS)) return fail(E_BAD_LENGTH, promptTokens);
  const predict = oslHat < 0;
  if (!(predict || oslHat <= MAX_TOKENS) || isNaN(oslHat) || (predict && oslClasses() == 0)) return fail(E_BAD_OSL, oslHat);
  if (!(prevOutputTokens <= MAX_TOKENS) || !(maxTokens <= MAX_TOKENS)) return fail(E_BAD_LENGTH, isNaN(prevOutputTokens) ? prevOutputTokens : maxTokens);
  if (turn < 0) return fail(E_BAD_TURN, turn);
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
  const cachedD = <f64>matchedD * tokensPerBlock;
  const cachedP = <f64>matchedP * tokensPerBlock;
  const effD = isl - min(cachedD, isl);
  const effP = isl - min(cachedP, isl);

  // 5. the bit
  rc = decide(isl, effP, effD, oslHat, min(cachedD, isl), turn, contextTokens,
    prefillWorker >= 0 ? prefillLoadOf(prefillWorker) : -1);
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
  return OK;
}
