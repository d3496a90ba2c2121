// Staging a validated table into the staging area, in exactly the layouts assembly/policy/set-table.ts setTable and
// assembly/osl.ts checkOslSection read, and with exactly the values src/table/staging.ts stageTable computes (the same
// f64 operations in the same order, so the GMM constants are bit-identical): numbers as validation keeps them
// (−0 → 0; bits as written), rule defaults from the generated contract, then the output-length model's section.

import {
  E_TABLE_TOO_LARGE, KIND_DYNAMO_ISL, KIND_GMM, KIND_PPD, LIMIT_RULE_SLOTS, LIMIT_STAGING_F64, OK,
} from "../generated/abi";
import {
  KIND_LEARNED, KIND_PARAMS_START, LIST_DEFAULTS, PARAM_DEFAULT, PARAM_LIST_LENGTH, PARAM_LIST_START, PARAM_NAMES,
  PARAM_STAGE, PARAM_TYPES, PARAM_TYPE_SCALAR,
} from "../generated/names";
import { fail } from "../errors";
import { staging } from "../policy/state";
import { fdlibmLog } from "./fdlibm-log";
import { numberValue } from "./fields";
import { mapGet } from "./keys";
import { nodeCount, nodeEnd, nodeNum } from "./msgpack";
import { paramValue } from "./params";
import {
  bits, centroids, clusters, dims, featureIndex, features, kind, oslClasses, oslFeatureIndex, oslModel, params, scaler,
  variances, weights,
} from "./validate";
import { fallbackKind, fallbackParams, loadBound, oodBound } from "./guard-fields";

let length: i32 = 0; // f64 values staged
export let stagedK: i32 = 0;
export let stagedDims: i32 = 0;
export let oslAt: i32 = -1;

export function stagedLength(): i32 { return length; }

function put(v: f64): void {
  if (length < LIMIT_STAGING_F64) store<f64>(staging + (<usize>length << 3), v);
  length++;
}

/** Every item of array `node`: numbers as validation keeps them (−0 → 0). */
function putNumbers(node: i32): void {
  let c = node + 1;
  for (let i = 0; i < nodeCount(node); i++) {
    put(numberValue(c));
    c = nodeEnd(c);
  }
}

/** Bits as written (src/table/fields.ts keeps a bit's value as decoded). */
function putBits(node: i32): void {
  let c = node + 1;
  for (let i = 0; i < nodeCount(node); i++) {
    put(nodeNum(c));
    c = nodeEnd(c);
  }
}

/** The parameter of the current kind named `name` (an index into PARAM_*), or −1. */
function paramNamed(name: string): i32 {
  for (let p = KIND_PARAMS_START[kind]; p < KIND_PARAMS_START[kind + 1]; p++) if (PARAM_NAMES[p] == name) return p;
  return -1;
}

/** A list parameter's values (given, else its default), with its length first when `counted`. */
function putList(p: i32, counted: bool): void {
  const given = paramValue(params, p);
  if (counted) put(given >= 0 ? nodeCount(given) : PARAM_LIST_LENGTH[p]);
  if (given >= 0) putNumbers(given);
  else for (let i = 0; i < PARAM_LIST_LENGTH[p]; i++) put(LIST_DEFAULTS[PARAM_LIST_START[p] + i]);
}

function stageLearned(): void {
  const d = dims;
  let c = features + 1;
  for (let j = 0; j < d; j++, c = nodeEnd(c)) put(featureIndex(c));
  putNumbers(mapGet(scaler, "mean"));
  putNumbers(mapGet(scaler, "std"));
  let row = centroids + 1;
  for (let i = 0; i < clusters; i++, row = nodeEnd(row)) putNumbers(row);
  putBits(bits);
  if (kind == KIND_GMM) stageGmm();
  // the guard: the fallback rule (default dynamo-isl with its defaults) and the out-of-distribution bounds
  const rule = fallbackKind != 0 ? fallbackKind : KIND_DYNAMO_ISL;
  put(rule);
  putRuleParams(rule, fallbackParams, true);
  if (oodBound >= 0) {
    put(clusters);
    putNumbers(oodBound);
  } else put(0);
  // version 3: the load bounds, prefill then decode (the cluster shares are the host's: not staged)
  if (loadBound >= 0) {
    put(clusters);
    putNumbers(mapGet(loadBound, "prefill"));
    putNumbers(mapGet(loadBound, "decode"));
  } else put(0);
}

function stageGmm(): void {
  const d = dims;
  let row: i32;
  // log w_k − ½ Σ_j log(2π σ²_kj), as src/table/staging.ts computes it
  const log2pi = fdlibmLog(2 * Math.PI);
  let w = weights + 1;
  row = variances + 1;
  for (let k = 0; k < clusters; k++, w = nodeEnd(w), row = nodeEnd(row)) {
    let logDet: f64 = 0;
    let v = row + 1;
    for (let j = 0; j < d; j++, v = nodeEnd(v)) logDet += fdlibmLog(numberValue(v));
    put(fdlibmLog(numberValue(w)) - 0.5 * (logDet + <f64>d * log2pi));
  }
  row = variances + 1;
  for (let k = 0; k < clusters; k++, row = nodeEnd(row)) {
    let v = row + 1;
    for (let j = 0; j < d; j++, v = nodeEnd(v)) put(1 / numberValue(v));
  }
}

function stageRule(): void {
  if (kind == KIND_PPD) {
    const context = paramNamed("context_edges");
    putList(context, false);
    putList(paramNamed("ratio_edges"), true);
    putList(paramNamed("qps_levels"), true);
    const grid = paramValue(params, paramNamed("bits"));
    let ratios = grid + 1;
    for (let i = 0; i < nodeCount(grid); i++, ratios = nodeEnd(ratios)) {
      let row = ratios + 1;
      for (let j = 0; j < nodeCount(ratios); j++, row = nodeEnd(row)) putBits(row);
    }
    return;
  }
  putRuleParams(kind, params, false);
}

/** A rule's scalars, each at its stage slot (LIMIT_RULE_SLOTS of them, unused 0); a kind without scalars stages
 *  nothing unless `always`. */
function putRuleParams(ruleKind: i32, paramsNode: i32, always: bool): void {
  let any = false;
  for (let p = KIND_PARAMS_START[ruleKind]; p < KIND_PARAMS_START[ruleKind + 1]; p++)
    if (PARAM_TYPES[p] == PARAM_TYPE_SCALAR && PARAM_STAGE[p] >= 0) any = true;
  if (!always && !any) return;
  // slot by slot (no allocation): each slot's parameter, given or its default; a slot no parameter uses is 0
  for (let slot = 0; slot < LIMIT_RULE_SLOTS; slot++) {
    let v: f64 = 0;
    for (let p = KIND_PARAMS_START[ruleKind]; p < KIND_PARAMS_START[ruleKind + 1]; p++) {
      if (PARAM_TYPES[p] != PARAM_TYPE_SCALAR || PARAM_STAGE[p] != slot) continue;
      const given = paramValue(paramsNode, p);
      v = given >= 0 ? numberValue(given) : PARAM_DEFAULT[p];
    }
    put(v);
  }
}

function stageOsl(): void {
  const names = mapGet(oslClasses, "names");
  const f = mapGet(oslModel, "features");
  const d = nodeCount(f);
  const c = nodeCount(names);
  put(d);
  put(c);
  let n = f + 1;
  for (let j = 0; j < d; j++, n = nodeEnd(n)) put(oslFeatureIndex(n));
  putNumbers(mapGet(oslModel, "mean"));
  putNumbers(mapGet(oslModel, "std"));
  let row = mapGet(oslModel, "weights") + 1;
  for (let i = 0; i < c; i++, row = nodeEnd(row)) putNumbers(row);
  putNumbers(mapGet(oslModel, "bias"));
  putNumbers(mapGet(oslClasses, "representative"));
}

/** Stages the validated table. OK, or E_TABLE_TOO_LARGE when it needs more than the staging area holds. */
export function stageTable(): i32 {
  length = 0;
  oslAt = -1;
  const learned = KIND_LEARNED[kind] != 0;
  stagedK = learned ? clusters : 0;
  stagedDims = learned ? dims : 0;
  if (learned) stageLearned();
  else stageRule();
  if (oslModel >= 0 && oslClasses >= 0) {
    oslAt = length;
    stageOsl();
  }
  if (length > LIMIT_STAGING_F64) return fail(E_TABLE_TOO_LARGE, length);
  return OK;
}
