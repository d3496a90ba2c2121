// What the policy keeps: the staging area the host writes a table into, the active table (in the layouts classify
// and decide read), the signals the host keeps current, and the last decision's outputs. Everything is allocated
// once by policyInit; set-table.ts validates a staged table and only then copies it in here, so a rejected table
// leaves the active one untouched.

import {
  KIND_DYNAMO_ISL, KIND_NONE, LIMIT_MAX_DIMS, LIMIT_MAX_K, LIMIT_STAGING_F64, REASON_RULE,
} from "../generated/abi";

// @ts-ignore: decorator
@inline export const MAX_K: i32 = LIMIT_MAX_K;
// @ts-ignore: decorator
@inline export const MAX_DIMS: i32 = LIMIT_MAX_DIMS;
// @ts-ignore: decorator
@inline export const MAX_RATIO_EDGES: i32 = 15;
// @ts-ignore: decorator
@inline export const MAX_QPS_LEVELS: i32 = 64;
export const STAGING_F64: i32 = LIMIT_STAGING_F64;
// @ts-ignore: decorator
@inline const MAX_PPD_CELLS: i32 = 3 * (MAX_RATIO_EDGES + 1) * MAX_QPS_LEVELS;

export let staging: usize = 0; // f64[STAGING_F64], written by the host before setTable
export let scores: usize = 0; // f64[MAX_K]: distance (kmeans) or log-likelihood (gmm) per cluster, last decide
export let standardized: usize = 0; // f64[MAX_DIMS]: the last standardized feature vector
export let logFeatures: usize = 0; // f64[4]: their log1p
export let gathered: usize = 0; // f64[MAX_DIMS]: log1p of the table's features, in its order (0 past dims)
export let naturalOrder: bool = false; // the table uses all four features in their own order: no gathering

// active table
export let kind: i32 = KIND_NONE;
export let k: i32 = 0;
export let dims: i32 = 0;
export let featureIdx: usize = 0; // i32[MAX_DIMS]
export let mean: usize = 0; // f64[MAX_DIMS]
export let std: usize = 0; // f64[MAX_DIMS]
export let centroids: usize = 0; // f64[MAX_K * MAX_DIMS]
// k-means centroids for f64x2: pair p (centroids 2p, 2p+1) is 4 dims × 2 lanes, dims past the table's padded with 0
// (x − 0 = 0 adds +0 to a distance, exactly), and the missing partner of an odd K's last centroid with NaN (its
// distance is NaN, which never compares below the best)
export let centroidPairs: usize = 0; // f64[(MAX_K / 2) × 4 × 2]
// k-means, K ≤ 8: cluster c's key (c << 8) | value, an i64 lane per cluster in the lanes of centroidPairs, so the
// nearest cluster's index and value come out of one selection (ordered as the indices are: values are < 256)
export let clusterKeys: usize = 0; // i64[8]
export let invVar: usize = 0; // f64[MAX_K * MAX_DIMS] (gmm)
export let logConst: usize = 0; // f64[MAX_K] (gmm): log w_k − ½ Σ_j log σ²_kj, computed by the host
// u8[MAX_PPD_CELLS] (per cluster 0 local, 1 remote, 2 the fallback rule; or bits per PPD cell)
export let bits: usize = 0;
// a rule's staged parameters (spec limits.rule_slots of them; slots a kind does not use are 0)
export let param0: f64 = 0;
export let param1: f64 = 0;
export let param2: f64 = 0;
export let param3: f64 = 0;
export let ratioEdges: usize = 0; // f64[MAX_RATIO_EDGES]
export let nRatioEdges: i32 = 0;
export let qpsLevels: usize = 0; // f64[MAX_QPS_LEVELS]
export let nQps: i32 = 0;
// the guard of a learned table (table version 2): the fallback rule and the out-of-distribution bounds
export let fallbackKind: i32 = KIND_DYNAMO_ISL;
export let fallback0: f64 = 2048;
export let fallback1: f64 = 0.7;
export let fallback2: f64 = 0;
export let fallback3: f64 = 0;
// f64[MAX_K]: kmeans the largest in-distribution squared distance, gmm the lowest log-likelihood
export let oodBound: usize = 0;
export let hasOodBounds: bool = false;
// table version 3: per cluster, the highest load its value was tested at (f64[MAX_K] each): the chosen prefill
// worker's active prefill tokens, the chosen decode worker's active prefill + decode tokens
export let loadBoundPrefill: usize = 0;
export let loadBoundDecode: usize = 0;
export let hasLoadBounds: bool = false;

// signals the host keeps current (rule inputs that are not per request)
export let prefillQueue: f64 = 0;
export let qps: f64 = 0;

export function policyInit(): void {
  staging = heap.alloc(<usize>STAGING_F64 << 3);
  scores = heap.alloc(<usize>(MAX_K + 1) << 3); // + 1: an odd K's last pair writes its padding lane's NaN there
  standardized = heap.alloc(<usize>MAX_DIMS << 3);
  logFeatures = heap.alloc(4 << 3);
  gathered = heap.alloc(<usize>MAX_DIMS << 3);
  featureIdx = heap.alloc(<usize>MAX_DIMS << 2);
  mean = heap.alloc(<usize>MAX_DIMS << 3);
  std = heap.alloc(<usize>MAX_DIMS << 3);
  centroids = heap.alloc(<usize>(MAX_K * MAX_DIMS) << 3);
  centroidPairs = heap.alloc(<usize>((MAX_K + 1) >> 1) << 6);
  clusterKeys = heap.alloc(8 << 3);
  invVar = heap.alloc(<usize>(MAX_K * MAX_DIMS) << 3);
  logConst = heap.alloc(<usize>MAX_K << 3);
  oodBound = heap.alloc(<usize>MAX_K << 3);
  loadBoundPrefill = heap.alloc(<usize>MAX_K << 3);
  loadBoundDecode = heap.alloc(<usize>MAX_K << 3);
  bits = heap.alloc(<usize>MAX_PPD_CELLS);
  ratioEdges = heap.alloc(<usize>MAX_RATIO_EDGES << 3);
  qpsLevels = heap.alloc(<usize>MAX_QPS_LEVELS << 3);
}

export function tableKind(): i32 { return kind; }
export function tableK(): i32 { return k; }
export function tableDims(): i32 { return dims; }

export function setSignals(queue: f64, currentQps: f64): bool {
  if (!(queue >= 0) || !(currentQps >= 0) || queue > 1e15 || currentQps > 1e15) return false;
  prefillQueue = queue;
  qps = currentQps;
  return true;
}

// decision outputs of decide()
export let outBit: i32 = 0;
export let outCluster: i32 = -1;
export let outReason: i32 = REASON_RULE;
export let outScore: f64 = 0;
