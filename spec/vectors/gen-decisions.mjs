// Generates spec/vectors/decisions.json: cross-language known answers for the policy (every table kind, from the
// fixture tables in spec/vectors/tables/) and for whole routing decisions (worker choice + features + bit).
//
// Deliberately independent of src/ and of the WebAssembly core: the tables are read with msgpackr's plain `unpack`,
// the rules are written out here as docs/table-format.md states them, and routing uses a toy prefix index in which a
// block is identified by the prompt prefix it ends (what chained hashing identifies, barring collisions). The tests
// (test/vectors-decisions.test.ts) replay the file against the core and the TypeScript reference; Python and Go
// bindings replay the same file. Run from the repository root:  node spec/vectors/gen-decisions.mjs

import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { unpack } from "msgpackr";

const TABLES = new URL("./tables/", import.meta.url);
const LCG_VOCAB = 152064;
const MARGIN = 1e-6; // a learned case is kept only if its best score beats the runner-up by more than this (relative)
const utf8 = new TextEncoder();

const description = [
  "Known answers for dolphin-routing decisions, shared by every binding. Tables are the fixture files in",
  "spec/vectors/tables/ (plain msgpack, docs/table-format.md). Bits: 0 = local prefill, 1 = remote prefill.",
  "",
  "'decide' cases: features only (the core's decideFeatures(isl, eff_P, eff_D, osl_hat, turn, context_tokens),",
  "with no worker: the decode worker's cached tokens are isl - eff_D, and there is no prefill worker, so dynamo-load",
  "sees an unknown prefill load and always answers remote). Before each case set the signals",
  "(prefill_queue, qps). context_tokens -1 means unknown (PPD then uses isl - eff_D). expected.cluster is the",
  "k-means/GMM cluster or the PPD grid cell index (ctx_class * (ratio_edges + 1) + ratio_class) * Q + qps_index,",
  "else -1; expected.reason is 'cluster' (learned kinds), 'rule' or 'first-turn' (PPD turn <= 1).",
  "Version-2 learned tables (the *-guarded files): a cluster valued 2 is decided by the table's fallback rule",
  "(reason 'rule-fallback'; 'fallback' absent = dynamo-isl with its defaults), and a request whose best score lies",
  "beyond its cluster's ood_bound (kmeans: distance > bound; gmm: log-likelihood < bound) is decided by the fallback",
  "rule too (reason 'out-of-distribution'); expected.cluster is still the nearest cluster. Such cases were kept",
  "only if the score differs from the bound by more than 1e-6 relative.",
  "Version-3 learned tables (kmeans-load): when the cluster's value is 0 or 1 and the request is in distribution,",
  "a prefill load (the chosen prefill worker's active_prefill_tokens, checked only when a prefill worker was",
  "chosen) above load_bound.prefill[k], or a decode load (the chosen decode worker's active_prefill_tokens +",
  "active_decode_tokens) above load_bound.decode[k], is decided by the fallback rule (reason 'load-out-of-range').",
  "'decide' cases have no workers, so no load: the bounds never fire there.",
  "Learned kinds: z_j = (log1p(x_j) - mean_j) / std_j in the table's feature order ('standardized');",
  "'scores' are, per cluster, the squared Euclidean distance (kmeans) or the log-likelihood",
  "log(w_k) - 1/2 sum_j log(2 pi var_kj) - 1/2 sum_j (z_j - mu_kj)^2 / var_kj (gmm: the full log-density of the",
  "component, weighted). Compare 'standardized' and",
  "'scores' with tolerance |actual - expected| <= 1e-9 * max(1, |expected|); everything else exactly. Every learned",
  "case was kept only if its best score beats the runner-up by more than 1e-6 relative, so a last-bit difference in",
  "log1p cannot change the cluster.",
  "",
  "'route' cases: whole routing decisions through the Router API. Build a router with the table, block_size,",
  "model, salt, load_scale and the workers in the order listed (worker index = position; cost ties go to the lower",
  "index). 'prompts' maps names to inputs: token mode 'tokens' (ids) or 'tokens_formula' (a list of segments,",
  "concatenated; {kind:'lcg', n, seed} is hashes.json's formula: x = seed; n times { x = (x * 1103515245 + 12345)",
  "mod 2^31; emit x mod 152064 }); text mode 'text' or 'text_formula' (segments {kind:'repeat', unit, count}",
  "concatenated), hashed as UTF-8 bytes. Then replay 'index' in order: each entry stores on 'worker' the block hashes",
  "of the first 'prefix_tokens' tokens (text mode: 'prefix_bytes' UTF-8 bytes) of 'prompt', computed with the",
  "binding's own hashing under the router's block size and root, in prompt order (the last block is the most",
  "recently used); an entry with 'tier' stores them in that cache tier (spec/abi.json tiers; absent: GPU, the",
  "device), one with 'remove': true removes them from that tier instead (a block stays while any tier holds it, and",
  "keeps its place in the LRU order). 'tier_weights', when given, sets a lower tier's weight (default CPU 0.8).",
  "Set each worker's load (active_prefill_tokens, active_decode_tokens; unlisted workers 0) and the",
  "signals, then route 'request' (the named prompt; prompt_tokens, osl_hat, turn, decode_worker pin, context_tokens",
  "-1 = unknown). Worker cost = load_scale * (active_prefill_tokens + max(isl - weighted(matched) * tokens_per_block,",
  "0)) + active_decode_tokens, weighted(m) = (m - k) + k * weight, k the blocks among the first m the worker holds",
  "in the lower tier only (a worker with none: weighted(m) = m); the decode worker is the cheapest decode-capable worker (or the pinned one), the prefill",
  "worker the cheapest prefill-capable worker other than the decode worker (null if none). tokens_per_block is",
  "block_size in token mode and 16 in text mode (64-byte blocks, isl = ceil(bytes / 4) unless prompt_tokens > 0).",
  "eff_X = isl - cached_X, cached_X = weighted(min(matched_X, floor(max(isl - 1, 0) / tokens_per_block))) *",
  "tokens_per_block: vLLM's rule, the engine always computes the prompt's last token, so at most isl - 1 tokens, in",
  "whole blocks, come from cache (a prompt of exactly n blocks, all cached, still computes its last block); the rules'",
  "cached_D is the same cached_D. path = bit when there is a prefill worker, else local with",
  "reason 'no-prefill-worker' if the bit was 1. expected.cluster is null for rules (the Router API's value).",
  "cost is the expected worker cost {decode, prefill} (prefill 0 when there is no prefill worker).",
  "load is {prefill: the chosen prefill worker's active_prefill_tokens (null when none), decode: the chosen decode",
  "worker's active_prefill_tokens + active_decode_tokens}: the decision record's load_p (-1 for null) and load_d.",
]
  .join(" ")
  .replace(/ {2}/g, "\n");

// ---------------------------------------------------------------------------------------------------------------
// Tables and the policy, straight from docs/table-format.md.

const DEFAULT_PARAMS = {
  "dynamo-isl": { max_local_prefill_tokens: 2048, max_local_prefill_ratio: 0.7 },
  "dynamo-load": {},
  "dynamo-legacy": { max_local_prefill_length: 1000, max_prefill_queue_size: 2 },
  "dynamo-isl-or-load": {
    max_local_prefill_tokens: 2048,
    max_local_prefill_ratio: 0.7,
    prefill_busy_tokens: 8192,
    decode_busy_tokens: 0,
  },
  trtllm: { max_local_prefill_length: 0 },
  "llm-d": { non_cached_tokens: 0, prompt_tokens: 0 },
  "always-local": {},
  "always-remote": {},
  ppd: {
    context_edges: [512, 4096],
    ratio_edges: [0.125, 0.25, 0.5, 1, 2, 4, 8, 16],
    qps_levels: [0.5, 1, 2, 4, 6, 8, 10, 12, 16, 20],
    w_ttft: 1,
    w_tpot: 1,
  },
};

const tableCache = new Map();
function table(file) {
  let t = tableCache.get(file);
  if (!t) {
    t = unpack(readFileSync(new URL(file, TABLES)));
    if (t.kind !== "kmeans" && t.kind !== "gmm") t.params = { ...DEFAULT_PARAMS[t.kind], ...(t.params ?? {}) };
    tableCache.set(file, t);
  }
  return t;
}

const FEATURE_INDEX = { isl: 0, eff_P: 1, eff_D: 2, osl_hat: 3 };

/** Standardized features, per-cluster scores and the winner with its margin (learned kinds). */
function classify(t, x) {
  const z = t.features.map((name, j) => (Math.log1p(x[FEATURE_INDEX[name]]) - t.scaler.mean[j]) / t.scaler.std[j]);
  const scores = t.centroids.map((mu, k) => {
    if (t.kind === "kmeans") return mu.reduce((s, m, j) => s + (z[j] - m) ** 2, 0);
    let logDet = 0;
    let quad = 0;
    for (let j = 0; j < z.length; j++) {
      logDet += Math.log(t.variances[k][j]);
      quad += (z[j] - mu[j]) ** 2 / t.variances[k][j];
    }
    return Math.log(t.weights[k]) - 0.5 * (logDet + t.features.length * Math.log(2 * Math.PI)) - 0.5 * quad;
  });
  const better = t.kind === "kmeans" ? (a, b) => a < b : (a, b) => a > b;
  let best = 0;
  for (let k = 1; k < scores.length; k++) if (better(scores[k], scores[best])) best = k;
  const others = scores.filter((_, k) => k !== best);
  const runnerUp = others.reduce((a, b) => (better(a, b) ? a : b), others[0]);
  const margin =
    others.length === 0
      ? Infinity
      : Math.abs(runnerUp - scores[best]) / Math.max(1, Math.abs(runnerUp), Math.abs(scores[best]));
  return { z, scores, best, margin };
}

/** Number of edges strictly below v: a value equal to an edge falls in the lower class. */
const classOf = (v, edges) => edges.filter((e) => v > e).length;

/** Nearest level; a tie goes to the lower level. */
function nearestLevel(v, levels) {
  let q = 0;
  for (let i = 1; i < levels.length; i++) if (Math.abs(v - levels[i]) < Math.abs(v - levels[q])) q = i;
  return q;
}

/**
 * The policy's answer. `cachedD` = tokens cached on the decode worker (clamped to isl), `prefillBusy` = the
 * chosen prefill worker's active prefill tokens or -1 when unknown, `decodeLoad` = the chosen decode worker's
 * active prefill + decode tokens (0 without workers), signals = {prefill_queue, qps}.
 */
function decide(t, { isl, effP, effD, osl, turn, ctx, cachedD, prefillBusy, decodeLoad = 0, signals }) {
  const p = t.params;
  const rule = (bit) => ({ bit, cluster: -1, reason: "rule" });
  switch (t.kind) {
    case "kmeans":
    case "gmm": {
      const c = classify(t, [isl, effP, effD, osl]);
      const value = t.bits[c.best];
      const bound = t.ood_bound?.[c.best];
      if (bound !== undefined) {
        c.boundMargin = Math.abs(c.scores[c.best] - bound) / Math.max(1, Math.abs(bound), Math.abs(c.scores[c.best]));
      }
      const outside =
        bound !== undefined && (t.kind === "kmeans" ? c.scores[c.best] > bound : c.scores[c.best] < bound);
      if (outside || value === 2) {
        const f = t.fallback ?? { kind: "dynamo-isl" };
        const fallback = { kind: f.kind, params: { ...DEFAULT_PARAMS[f.kind], ...(f.params ?? {}) } };
        const d = decide(fallback, { isl, effP, effD, osl, turn, ctx, cachedD, prefillBusy, decodeLoad, signals });
        return {
          bit: d.bit,
          cluster: c.best,
          reason: outside ? "out-of-distribution" : "rule-fallback",
          classified: c,
        };
      }
      // version 3: above the load the cluster's value was tested at (strictly), the fallback rule decides
      const lb = t.load_bound;
      if (lb && ((prefillBusy >= 0 && prefillBusy > lb.prefill[c.best]) || decodeLoad > lb.decode[c.best])) {
        const f = t.fallback ?? { kind: "dynamo-isl" };
        const fallback = { kind: f.kind, params: { ...DEFAULT_PARAMS[f.kind], ...(f.params ?? {}) } };
        const d = decide(fallback, { isl, effP, effD, osl, turn, ctx, cachedD, prefillBusy, decodeLoad, signals });
        return { bit: d.bit, cluster: c.best, reason: "load-out-of-range", classified: c };
      }
      return { bit: value, cluster: c.best, reason: "cluster", classified: c };
    }
    case "dynamo-isl": {
      const local = effD < p.max_local_prefill_tokens && effD / Math.max(isl, 1) < p.max_local_prefill_ratio;
      return rule(local ? 0 : 1);
    }
    case "dynamo-load": {
      const busy = prefillBusy >= 0 && prefillBusy > p.prefill_busy_threshold * p.max_num_batched_tokens;
      return rule(busy ? 0 : 1);
    }
    case "dynamo-isl-or-load": {
      // Dynamo's isl_or_load: local iff isl_bounding says local or the prefill worker is busy (strictly above its
      // tokens; unknown: calm), unless the decode-busy gate is set (> 0) and the decode load is strictly above it
      const islLocal = effD < p.max_local_prefill_tokens && effD / Math.max(isl, 1) < p.max_local_prefill_ratio;
      const prefillBusyNow = prefillBusy >= 0 && prefillBusy > p.prefill_busy_tokens;
      const decodeBusy = p.decode_busy_tokens > 0 && decodeLoad > p.decode_busy_tokens;
      return rule((islLocal || prefillBusyNow) && !decodeBusy ? 0 : 1);
    }
    case "dynamo-legacy":
      return rule(effD > p.max_local_prefill_length && signals.prefill_queue < p.max_prefill_queue_size ? 1 : 0);
    case "trtllm":
      return rule(cachedD === 0 || isl - cachedD > p.max_local_prefill_length ? 1 : 0);
    case "llm-d":
      return rule(p.non_cached_tokens > 0 && isl >= p.prompt_tokens && isl - cachedD >= p.non_cached_tokens ? 1 : 0);
    case "always-local":
      return rule(0);
    case "always-remote":
      return rule(1);
    case "ppd": {
      if (turn <= 1) return { bit: 1, cluster: -1, reason: "first-turn" };
      const context = ctx >= 0 ? ctx : cachedD;
      const ratio = Math.max(isl - context, 0) / Math.max(osl, 1);
      const c = classOf(context, p.context_edges);
      const r = classOf(ratio, p.ratio_edges);
      const q = nearestLevel(signals.qps, p.qps_levels);
      const cell = (c * (p.ratio_edges.length + 1) + r) * p.qps_levels.length + q;
      return { bit: p.bits[c][r][q], cluster: cell, reason: "rule" };
    }
    default:
      throw new Error(`unknown kind ${t.kind}`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// decide cases

const decideCases = [];
const countByTable = {};

function decideCase(file, { isl, effP = isl, effD = isl, osl = 0, turn = 1, ctx = -1, queue = 0, qps = 0, note }) {
  const t = table(file);
  if (!(effP >= 0 && effP <= isl && effD >= 0 && effD <= isl)) throw new Error(`bad features ${isl} ${effP} ${effD}`);
  const signals = { prefill_queue: queue, qps };
  const d = decide(t, { isl, effP, effD, osl, turn, ctx, cachedD: isl - effD, prefillBusy: -1, signals });
  if (d.classified && !(d.classified.margin > MARGIN)) return false;
  if (d.classified && d.classified.boundMargin !== undefined && !(d.classified.boundMargin > MARGIN)) return false;
  const c = {
    table: file,
    ...(note ? { note } : {}),
    isl,
    eff_P: effP,
    eff_D: effD,
    osl_hat: osl,
    turn,
    context_tokens: ctx,
    signals,
    expected: { bit: d.bit, cluster: d.cluster, reason: d.reason },
  };
  if (d.classified) {
    c.standardized = d.classified.z;
    c.scores = d.classified.scores;
  }
  decideCases.push(c);
  countByTable[file] = (countByTable[file] ?? 0) + 1;
  return true;
}

// Learned kinds: a deterministic grid, then round-robin over the winning clusters so every cluster is exercised.
function learnedCases(file, want) {
  const t = table(file);
  const isls = [0, 1, 17, 100, 333, 512, 1000, 2048, 4096, 8000, 16384, 32768, 131072];
  const fracs = [0, 0.25, 0.5, 0.9, 1];
  const osls = [0, 64, 512, 2048, 8192];
  const byCluster = new Map();
  for (const isl of isls)
    for (const fp of fracs)
      for (const fd of fracs)
        for (const osl of osls) {
          const effP = isl - Math.round(fp * isl);
          const effD = isl - Math.round(fd * isl);
          const key = `${isl}/${effP}/${effD}/${osl}`;
          const c = classify(t, [isl, effP, effD, osl]);
          if (!(c.margin > MARGIN)) continue;
          if (!byCluster.has(c.best)) byCluster.set(c.best, []);
          const list = byCluster.get(c.best);
          if (!list.some((x) => x.key === key)) list.push({ key, isl, effP, effD, osl });
        }
  // the zero vector and one isolated large prompt first: boundaries of log1p
  let n = 0;
  if (decideCase(file, { isl: 0, osl: 0, note: "isl 0: every feature log1p(0) = 0" })) n++;
  if (decideCase(file, { isl: 1048576, effP: 1048576, effD: 0, osl: 64, note: "2^20 tokens, fully cached on decode" }))
    n++;
  const clusters = [...byCluster.keys()].sort((a, b) => a - b);
  // spread the picks over each cluster's candidates (every stride-th), not just its first few
  const cursor = new Map(clusters.map((k) => [k, 0]));
  const stride = 7;
  const picked = new Set(["0/0/0/0"]);
  let progress = true;
  while (n < want && progress) {
    progress = false;
    for (const k of clusters) {
      if (n >= want) break;
      const list = byCluster.get(k);
      let i = cursor.get(k);
      while (i < list.length * stride && picked.has(list[(i * stride) % list.length].key)) i++;
      if (i >= list.length * stride) continue;
      const c = list[(i * stride) % list.length];
      cursor.set(k, i + 1);
      picked.add(c.key);
      if (decideCase(file, { isl: c.isl, effP: c.effP, effD: c.effD, osl: c.osl })) {
        n++;
        progress = true;
      }
    }
  }
  return clusters;
}

const learnedClusters = {
  "kmeans.msgpack": learnedCases("kmeans.msgpack", 32),
  "gmm.msgpack": learnedCases("gmm.msgpack", 28),
  "kmeans-guarded.msgpack": learnedCases("kmeans-guarded.msgpack", 40),
  "gmm-guarded.msgpack": learnedCases("gmm-guarded.msgpack", 32),
  // without workers there is no load: the load bounds never fire, the cases check the table still decides
  "kmeans-load.msgpack": learnedCases("kmeans-load.msgpack", 16),
  "kmeans-load-isl-or-load.msgpack": learnedCases("kmeans-load-isl-or-load.msgpack", 16),
};

// The signals and PPD inputs of a learned or rule case never matter except where noted; a few cases vary them
// anyway so a binding that passes them wrongly is caught.
decideCase("kmeans.msgpack", {
  isl: 4096,
  effP: 4096,
  effD: 1024,
  osl: 512,
  turn: 3,
  ctx: 100,
  queue: 5,
  qps: 7,
  note: "turn, context and signals do not matter",
});
decideCase("gmm.msgpack", {
  isl: 4096,
  effP: 4096,
  effD: 1024,
  osl: 512,
  turn: 0,
  ctx: 100,
  queue: 5,
  qps: 7,
  note: "turn, context and signals do not matter",
});

// dynamo-isl (and the same cases on the minimal table, whose defaults a reader fills in)
for (const file of ["dynamo-isl.msgpack", "dynamo-isl-minimal.msgpack"]) {
  const cases = [
    { isl: 0, effD: 0, note: "isl 0: 0 < 2048 and 0 / max(0, 1) < 0.7: local" },
    { isl: 1, effD: 1, note: "ratio 1: remote" },
    { isl: 1, effD: 0 },
    { isl: 4096, effD: 2048, note: "eff_D exactly 2048 (strict <): remote" },
    { isl: 4096, effD: 2047, note: "eff_D 2047, ratio 0.4998: local" },
    { isl: 8192, effD: 2048, note: "eff_D 2048, ratio 0.25: remote on the token bound alone" },
    { isl: 1000, effD: 700, note: "ratio exactly 0.7 (strict <): remote" },
    { isl: 1000, effD: 699, note: "ratio 0.699: local" },
    { isl: 10, effD: 7, note: "ratio exactly 0.7 on a small prompt: remote" },
    { isl: 2000, effD: 1400, note: "ratio exactly 0.7: remote" },
    { isl: 2925, effD: 2047, note: "eff_D 2047 and ratio 0.69982: local" },
    { isl: 2924, effD: 2047, note: "ratio 0.70007: remote" },
    { isl: 100000, effD: 2047, effP: 0, note: "long prompt, almost all cached: local" },
    { isl: 100000, effD: 100000, note: "nothing cached: remote" },
    { isl: 512, effD: 0, effP: 512 },
    { isl: 512, effD: 512, effP: 0, note: "eff_P does not matter" },
    { isl: 3000, effD: 2100, queue: 0, qps: 20, note: "ratio 0.7 exactly, with signals: remote" },
    { isl: 300, effD: 200, osl: 8192, turn: 1, note: "ratio 0.667: local" },
  ];
  for (const c of cases) decideCase(file, c);
}

// dynamo-load: without workers the prefill load is unknown, so there is no bypass: always remote
for (const c of [
  { isl: 0, effD: 0 },
  { isl: 1, effD: 1 },
  { isl: 100, effD: 0 },
  { isl: 100, effD: 100 },
  { isl: 6553, effD: 6553 },
  { isl: 6554, effD: 6554 },
  { isl: 8192, effD: 4096 },
  { isl: 100000, effD: 50000 },
  { isl: 2048, effD: 2048, queue: 10, qps: 20, note: "signals do not matter" },
  { isl: 2048, effD: 0, effP: 0, osl: 8192, turn: 5, ctx: 2048, note: "PPD inputs do not matter" },
  { isl: 4096, effD: 4096, effP: 0 },
  { isl: 16384, effD: 1, effP: 16384 },
  { isl: 7000, effD: 7000, queue: 1 },
  { isl: 65536, effD: 65536 },
  { isl: 3, effD: 2 },
])
  decideCase("dynamo-load.msgpack", { note: "no prefill worker: unknown load, no bypass: remote", ...c });

// dynamo-isl-or-load: without workers the prefill load is unknown (calm) and the decode load 0 (never above the gate),
// so it decides as isl_bounding (2048 / 0.7)
for (const c of [
  { isl: 0, effD: 0, note: "isl 0: local" },
  { isl: 1, effD: 1, note: "ratio 1: remote" },
  { isl: 4096, effD: 2048, note: "eff_D exactly 2048 (strict <): remote" },
  { isl: 4096, effD: 2047, note: "eff_D 2047, ratio 0.4998: local" },
  { isl: 8192, effD: 2048 },
  { isl: 1000, effD: 700, note: "ratio exactly 0.7 (strict <): remote" },
  { isl: 1000, effD: 699, note: "ratio 0.699: local" },
  { isl: 2925, effD: 2047 },
  { isl: 2924, effD: 2047 },
  { isl: 100000, effD: 2047, effP: 0, note: "long prompt, almost all cached: local" },
  { isl: 100000, effD: 100000, note: "nothing cached, the prefill worker's load unknown (calm): remote" },
  { isl: 512, effD: 0, effP: 512 },
  { isl: 3000, effD: 2100, queue: 9, qps: 20, note: "the prefill queue signal is not its busy signal: remote" },
  { isl: 300, effD: 200, osl: 8192, turn: 3, ctx: 100, note: "PPD inputs do not matter: local" },
  { isl: 65536, effD: 65536, queue: 0 },
])
  decideCase("dynamo-isl-or-load.msgpack", c);

// dynamo-legacy: remote iff eff_D > 1000 and prefill_queue < 2
for (const c of [
  { isl: 0, effD: 0 },
  { isl: 1000, effD: 1000, note: "eff_D exactly 1000 (strict >): local" },
  { isl: 1001, effD: 1001, note: "eff_D 1001, queue 0: remote" },
  { isl: 5000, effD: 1000, note: "eff_D 1000 of 5000: local" },
  { isl: 5000, effD: 1001, queue: 1, note: "queue 1 < 2: remote" },
  { isl: 5000, effD: 1001, queue: 2, note: "queue exactly 2 (strict <): local" },
  { isl: 5000, effD: 5000, queue: 3, note: "queue 3: local" },
  { isl: 5000, effD: 5000, queue: 1.5, note: "fractional queue 1.5 < 2: remote" },
  { isl: 5000, effD: 5000, queue: 1, qps: 20 },
  { isl: 20000, effD: 999, queue: 0 },
  { isl: 20000, effD: 20000, queue: 0 },
  { isl: 20000, effD: 20000, queue: 2 },
  { isl: 1500, effD: 1500, effP: 0, queue: 0, note: "eff_P does not matter" },
  { isl: 1500, effD: 500, effP: 1500, queue: 0 },
  { isl: 100, effD: 100, queue: 0 },
  { isl: 2048, effD: 1024, queue: 1 },
])
  decideCase("dynamo-legacy.msgpack", c);

// trtllm (max_local_prefill_length 0): remote iff match == 0 or isl - match > 0, match = isl - eff_D
for (const c of [
  { isl: 0, effD: 0, note: "isl 0: match 0: remote" },
  { isl: 1, effD: 1, note: "cached 0: remote" },
  { isl: 1, effD: 0, note: "fully cached: local" },
  { isl: 100, effD: 100, note: "cached 0: remote" },
  { isl: 100, effD: 0, note: "fully cached: local" },
  { isl: 100, effD: 1, note: "one uncached token: remote" },
  { isl: 4096, effD: 4096, effP: 0, note: "cached 0 on decode, fully cached on prefill: remote" },
  { isl: 4096, effD: 0, effP: 4096 },
  { isl: 4096, effD: 16 },
  { isl: 100000, effD: 0, queue: 5, qps: 20 },
  { isl: 100000, effD: 100000 },
  { isl: 17, effD: 1 },
  { isl: 17, effD: 0, osl: 2048, turn: 4, ctx: 17 },
  { isl: 2048, effD: 2047, note: "match 1: remote" },
  { isl: 65536, effD: 0 },
])
  decideCase("trtllm.msgpack", c);

// llm-d (fixture: both thresholds 0 = disaggregation disabled): always local, whatever the boundary
for (const c of [
  { isl: 0, effD: 0, note: "isl 0 = prompt_tokens 0 and uncached 0 = non_cached_tokens 0: still local (disabled)" },
  { isl: 1, effD: 1 },
  { isl: 1, effD: 0 },
  { isl: 100, effD: 100 },
  { isl: 100, effD: 0 },
  { isl: 4096, effD: 4096, effP: 0 },
  { isl: 4096, effD: 2048 },
  { isl: 100000, effD: 100000 },
  { isl: 100000, effD: 0, queue: 5, qps: 20 },
  { isl: 16, effD: 16, osl: 2048, turn: 3, ctx: 0 },
  { isl: 2048, effD: 1 },
  { isl: 65536, effD: 65535 },
  { isl: 512, effD: 256, effP: 512 },
  { isl: 7, effD: 7, queue: 2 },
  { isl: 999, effD: 998 },
])
  decideCase("llm-d.msgpack", { note: "non_cached_tokens 0: disabled: local", ...c });

// llm-d active (non_cached_tokens 256, prompt_tokens 512): remote iff isl >= 512 and isl - cached >= 256
for (const c of [
  { isl: 511, effD: 511, note: "below prompt_tokens: local" },
  { isl: 512, effD: 256, note: "both thresholds met exactly: remote" },
  { isl: 512, effD: 255, note: "uncached one short: local" },
  { isl: 4096, effD: 4096 },
  { isl: 4096, effD: 0 },
  { isl: 100000, effD: 300 },
  { isl: 1000, effD: 255, effP: 0 },
  { isl: 0, effD: 0 },
  { isl: 600, effD: 600, queue: 3, qps: 9 },
  { isl: 513, effD: 257 },
  { isl: 256, effD: 256 },
  { isl: 2048, effD: 256 },
  { isl: 2048, effD: 1 },
  { isl: 9000, effD: 4500, turn: 2, ctx: 10 },
  { isl: 70000, effD: 69999 },
])
  decideCase("llm-d-active.msgpack", c);

// trtllm with max_local_prefill_length 512: remote iff nothing cached or more than 512 uncached
for (const c of [
  { isl: 600, effD: 600, note: "nothing cached: remote" },
  { isl: 600, effD: 512, note: "512 uncached, not more: local" },
  { isl: 600, effD: 513, note: "513 uncached: remote" },
  { isl: 100, effD: 99 },
  { isl: 0, effD: 0 },
  { isl: 4096, effD: 100 },
  { isl: 4096, effD: 4095 },
  { isl: 20000, effD: 512, queue: 4 },
  { isl: 20000, effD: 20000, effP: 0 },
  { isl: 513, effD: 1 },
  { isl: 1, effD: 0 },
  { isl: 513, effD: 512 },
  { isl: 100000, effD: 600 },
  { isl: 2048, effD: 2047 },
  { isl: 8192, effD: 0 },
])
  decideCase("trtllm-512.msgpack", c);

// always-local / always-remote
const anyInputs = [
  { isl: 0, effD: 0 },
  { isl: 1, effD: 1 },
  { isl: 1, effD: 0 },
  { isl: 100, effD: 50, effP: 100 },
  { isl: 2048, effD: 2048 },
  { isl: 4096, effD: 0, effP: 0 },
  { isl: 100000, effD: 100000, queue: 5, qps: 20 },
  { isl: 512, effD: 512, osl: 2048, turn: 1 },
  { isl: 512, effD: 0, osl: 2048, turn: 2, ctx: 512 },
  { isl: 1000, effD: 1000, turn: 0 },
  { isl: 65536, effD: 1 },
  { isl: 33, effD: 17, osl: 64 },
  { isl: 8192, effD: 4096, queue: 1 },
  { isl: 300, effD: 299, qps: 3 },
  { isl: 1048576, effD: 1048576 },
];
for (const c of anyInputs) decideCase("always-local.msgpack", c);
for (const c of anyInputs) decideCase("always-remote.msgpack", c);

// ppd: turn 1 remote; from turn 2 the cell (context class, ratio class, nearest QPS level) of the 3 × 9 × 10 grid
for (const c of [
  {
    isl: 1000,
    effD: 0,
    osl: 100,
    turn: 1,
    ctx: 900,
    qps: 20,
    note: "turn 1: always remote (first-turn), whatever the cell holds",
  },
  { isl: 100, effD: 100, osl: 100, turn: 1, ctx: -1, qps: 0.5, note: "turn 1" },
  { isl: 0, effD: 0, osl: 0, turn: 1, note: "turn 1, isl 0" },
  {
    isl: 612,
    effD: 612,
    osl: 100,
    turn: 2,
    ctx: 512,
    qps: 4,
    note: "context exactly 512: class 0; ratio 1 exactly on an edge: class 3",
  },
  { isl: 613, effD: 613, osl: 100, turn: 2, ctx: 513, qps: 4, note: "context 513: class 1" },
  { isl: 4196, effD: 4196, osl: 100, turn: 2, ctx: 4096, qps: 4, note: "context exactly 4096: class 1" },
  { isl: 4197, effD: 4197, osl: 100, turn: 2, ctx: 4097, qps: 4, note: "context 4097: class 2" },
  { isl: 1000, effD: 1000, osl: 250, turn: 2, ctx: 500, qps: 6, note: "ratio exactly 2 (edge): class 4" },
  { isl: 1001, effD: 1001, osl: 250, turn: 2, ctx: 500, qps: 6, note: "ratio 2.004: class 5" },
  { isl: 564, effD: 564, osl: 512, turn: 2, ctx: 500, qps: 12, note: "ratio exactly 0.125: class 0" },
  { isl: 565, effD: 565, osl: 512, turn: 2, ctx: 500, qps: 12, note: "ratio 0.127: class 1" },
  {
    isl: 8692,
    effD: 8692,
    osl: 256,
    turn: 2,
    ctx: 4596,
    qps: 20,
    note: "ratio exactly 16 (last edge): class 8 is not reached",
  },
  { isl: 8693, effD: 8693, osl: 256, turn: 2, ctx: 4596, qps: 20, note: "ratio above 16: class 8" },
  {
    isl: 1000,
    effD: 1000,
    osl: 100,
    turn: 3,
    ctx: 1000,
    qps: 3,
    note: "no new input: ratio 0; qps 3 between levels 2 and 4: tie to the lower (index 2)",
  },
  { isl: 1500, effD: 1500, osl: 100, turn: 3, ctx: 1000, qps: 5, note: "qps 5 between 4 and 6: tie to 4 (index 3)" },
  { isl: 1500, effD: 1500, osl: 100, turn: 3, ctx: 1000, qps: 5.0001, note: "qps 5.0001: nearest 6 (index 4)" },
  {
    isl: 1500,
    effD: 1500,
    osl: 100,
    turn: 3,
    ctx: 1000,
    qps: 0.75,
    note: "qps 0.75 between 0.5 and 1: tie to 0.5 (index 0)",
  },
  {
    isl: 1500,
    effD: 1500,
    osl: 100,
    turn: 3,
    ctx: 1000,
    qps: 18,
    note: "qps 18 between 16 and 20: tie to 16 (index 8)",
  },
  { isl: 1500, effD: 1500, osl: 100, turn: 3, ctx: 1000, qps: 0, note: "qps 0: nearest 0.5 (index 0)" },
  { isl: 1500, effD: 1500, osl: 100, turn: 3, ctx: 1000, qps: 1000, note: "qps above the last level: index 9" },
  {
    isl: 3000,
    effD: 1000,
    osl: 500,
    turn: 2,
    ctx: -1,
    qps: 8,
    note: "context unknown: the decode worker's cached tokens isl - eff_D = 2000 (class 1); ratio 2 (class 4)",
  },
  {
    isl: 3000,
    effD: 1000,
    osl: 500,
    turn: 2,
    ctx: 2900,
    qps: 8,
    note: "the same request with context_tokens 2900 given: ratio 0.2 (class 1)",
  },
  {
    isl: 3000,
    effD: 3000,
    osl: 500,
    turn: 2,
    ctx: -1,
    qps: 8,
    note: "context unknown and nothing cached: context 0 (class 0), ratio 6 (class 6)",
  },
  {
    isl: 3000,
    effD: 0,
    osl: 500,
    turn: 2,
    ctx: -1,
    qps: 8,
    note: "context unknown and fully cached: context 3000 (class 1), ratio 0",
  },
  {
    isl: 10000,
    effD: 10000,
    osl: 100,
    turn: 2,
    ctx: 9000,
    qps: 20,
    note: "context class 2, ratio 10 (class 7), qps 20 (index 9)",
  },
  {
    isl: 10000,
    effD: 10000,
    osl: 100,
    turn: 2,
    ctx: 9950,
    qps: 0.5,
    note: "context class 2, ratio 0.5 exactly (class 2), qps index 0",
  },
  {
    isl: 300,
    effD: 0,
    osl: 2048,
    turn: 2,
    ctx: 0,
    qps: 20,
    note: "context 0 given (not unknown): class 0; ratio 0.146 (class 1)",
  },
  {
    isl: 200,
    effD: 200,
    osl: 10,
    turn: 7,
    ctx: 100,
    qps: 16,
    note: "ratio 10 (class 7), qps 16 (index 8): bit 1 in class 0",
  },
  {
    isl: 200,
    effD: 200,
    osl: 10,
    turn: 7,
    ctx: 100,
    qps: 0.5,
    note: "ratio 10 (class 7), qps 0.5 (index 0): 7 + 0 < 8: bit 0",
  },
  { isl: 5000, effD: 2000, osl: 64, turn: 2, ctx: 4200, qps: 10, queue: 3, note: "prefill_queue does not matter" },
])
  decideCase("ppd.msgpack", c);

// ---------------------------------------------------------------------------------------------------------------
// route cases: a toy index with the same semantics as the real one (per-worker LRU of block identities).

function lcgTokens({ n, seed }) {
  const out = new Array(n);
  let x = BigInt(seed);
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245n + 12345n) % 2147483648n;
    out[i] = Number(x % BigInt(LCG_VOCAB));
  }
  return out;
}

function promptInput(p) {
  if (p.tokens) return { mode: "tokens", items: p.tokens };
  if (p.tokens_formula) return { mode: "tokens", items: p.tokens_formula.flatMap((s) => lcgTokens(s)) };
  if (p.text !== undefined) return { mode: "text", items: [...utf8.encode(p.text)] };
  if (p.text_formula)
    return { mode: "text", items: [...utf8.encode(p.text_formula.map((s) => s.unit.repeat(s.count)).join(""))] };
  throw new Error("prompt without input");
}

/** Block identities of an input: block i is named by the whole prefix it ends (chained hashing's meaning). */
function blockKeys(scn, input) {
  const per = input.mode === "text" ? 64 : scn.block_size;
  const keys = [];
  for (let end = per; end <= input.items.length; end += per) {
    keys.push(`${input.mode}|${scn.model}\0${scn.salt}|${input.items.slice(0, end).join(",")}`);
  }
  return keys;
}

const ROLE_BITS = { prefill: 1, decode: 2, both: 3 };

function routeExpected(scn) {
  const t = table(scn.table);
  const workers = scn.workers.map((w) => ({ ...w, lru: new Map(), load: scn.loads?.[w.id] ?? {} }));
  const byId = Object.fromEntries(workers.map((w) => [w.id, w]));
  const prompts = Object.fromEntries(Object.entries(scn.prompts).map(([name, p]) => [name, promptInput(p)]));
  for (const op of scn.index ?? []) {
    const w = byId[op.worker];
    const input = prompts[op.prompt];
    const n = input.mode === "text" ? op.prefix_bytes : op.prefix_tokens;
    if (n === undefined || n > input.items.length) throw new Error(`${scn.name}: bad index op ${JSON.stringify(op)}`);
    if (w.capacity_blocks === 0) continue;
    const bit = (op.tier ?? "GPU") === "GPU" ? 1 : 2; // the tiers a block is held in: 1 the device, 2 the lower tier
    for (const key of blockKeys(scn, { mode: input.mode, items: input.items.slice(0, n) })) {
      const tiers = w.lru.get(key) ?? 0;
      if (op.remove) {
        if ((tiers & bit) === 0) continue;
        if (tiers === bit) w.lru.delete(key);
        else w.lru.set(key, tiers & ~bit); // its place in the LRU order kept
        continue;
      }
      if (tiers)
        w.lru.delete(key); // most recently used again
      else if (w.lru.size >= w.capacity_blocks) w.lru.delete(w.lru.keys().next().value); // evict the least recent
      w.lru.set(key, tiers | bit);
    }
  }
  const weight = scn.tier_weights?.CPU ?? 0.8;
  /** m blocks of the request's prompt on w, each lower-tier-only one at the lower tier's weight */
  const weighted = (w, m) => {
    let k = 0;
    for (let i = 0; i < m; i++) if (w.lru.get(keys[i]) === 2) k++;
    return m - k + k * weight;
  };
  const r = scn.request;
  const input = prompts[r.prompt];
  const keys = blockKeys(scn, input);
  const tpb = input.mode === "text" ? 16 : scn.block_size;
  const isl =
    input.mode === "text"
      ? r.prompt_tokens > 0
        ? r.prompt_tokens
        : Math.ceil(input.items.length / 4)
      : input.items.length;
  const matched = (w) => {
    let m = 0;
    while (m < keys.length && w.lru.has(keys[m])) m++;
    return m;
  };
  const cost = (w) =>
    (scn.load_scale ?? 1) * ((w.load.active_prefill_tokens ?? 0) + Math.max(isl - weighted(w, matched(w)) * tpb, 0)) +
    (w.load.active_decode_tokens ?? 0);
  const cheapest = (list) => list.reduce((best, w) => (best === null || cost(w) < cost(best) ? w : best), null);
  const decodeW =
    r.decode_worker !== undefined ? byId[r.decode_worker] : cheapest(workers.filter((w) => ROLE_BITS[w.role] & 2));
  const prefillW = cheapest(workers.filter((w) => ROLE_BITS[w.role] & 1 && w !== decodeW));
  const mD = matched(decodeW);
  const mP = prefillW ? matched(prefillW) : 0;
  // vLLM's rule: the engine always computes the prompt's last token, so at most isl - 1 tokens, in whole blocks, are cached
  const cacheable = Math.floor(Math.max(isl - 1, 0) / tpb);
  const cachedD = weighted(decodeW, Math.min(mD, cacheable)) * tpb;
  const effD = isl - cachedD;
  const effP = isl - (prefillW ? weighted(prefillW, Math.min(mP, cacheable)) * tpb : 0);
  const signals = { prefill_queue: scn.signals?.prefill_queue ?? 0, qps: scn.signals?.qps ?? 0 };
  const loadP = prefillW ? (prefillW.load.active_prefill_tokens ?? 0) : -1;
  const loadD = (decodeW.load.active_prefill_tokens ?? 0) + (decodeW.load.active_decode_tokens ?? 0);
  const d = decide(t, {
    isl,
    effP,
    effD,
    osl: r.osl_hat,
    turn: r.turn,
    ctx: r.context_tokens,
    cachedD,
    prefillBusy: loadP,
    decodeLoad: loadD,
    signals,
  });
  if (d.classified && !(d.classified.margin > MARGIN)) throw new Error(`${scn.name}: learned decision without margin`);
  const path = prefillW ? d.bit : 0;
  return {
    path: path === 1 ? "remote" : "local",
    bit: d.bit,
    reason: path !== d.bit ? "no-prefill-worker" : d.reason,
    decode_worker: decodeW.id,
    prefill_worker: prefillW ? prefillW.id : null,
    cluster: d.cluster >= 0 ? d.cluster : null,
    features: { isl, eff_P: effP, eff_D: effD, osl_hat: r.osl_hat },
    matched_blocks: { decode: mD, prefill: mP },
    blocks: keys.length,
    cost: { decode: cost(decodeW), prefill: prefillW ? cost(prefillW) : 0 },
    load: { prefill: prefillW ? loadP : null, decode: loadD },
  };
}

const lcg = (n, seed) => ({ kind: "lcg", n, seed });
const base = { block_size: 16, model: "", salt: "", load_scale: 1, signals: { prefill_queue: 0, qps: 0 } };
const req = (prompt, extra = {}) => ({ prompt, osl_hat: 256, turn: 1, context_tokens: -1, ...extra });
const W = (id, role, capacity_blocks = 1000) => ({ id, role, capacity_blocks });

const scenarios = [
  {
    name: "cache-aware decode choice: the worker holding more of the prefix wins",
    type: "cache-aware",
    table: "dynamo-isl.msgpack",
    workers: [W("d0", "decode"), W("d1", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(256, 1)] } },
    index: [
      { worker: "d0", prompt: "A", prefix_tokens: 32 },
      { worker: "d1", prompt: "A", prefix_tokens: 128 },
    ],
    request: req("A"),
  },
  {
    name: "cache-aware prefill choice: nothing cached on decode, the prefill worker with the longer shared prefix wins",
    type: "cache-aware",
    table: "dynamo-isl.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill"), W("p1", "prefill")],
    // B shares A's first 192 tokens (12 blocks); p1 holds all of A, p0 only 4 blocks of B
    prompts: { A: { tokens_formula: [lcg(192, 2), lcg(64, 3)] }, B: { tokens_formula: [lcg(192, 2), lcg(320, 4)] } },
    index: [
      { worker: "p0", prompt: "B", prefix_tokens: 64 },
      { worker: "p1", prompt: "A", prefix_tokens: 256 },
    ],
    request: req("B"),
  },
  {
    name: "load beats cache: the worker holding half the prompt is busier than the uncached prefill it saves",
    type: "load-beats-cache",
    table: "dynamo-isl.msgpack",
    workers: [W("d0", "decode"), W("d1", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(256, 5)] } },
    index: [{ worker: "d0", prompt: "A", prefix_tokens: 128 }],
    loads: {
      d0: { active_prefill_tokens: 0, active_decode_tokens: 1000 },
      d1: { active_prefill_tokens: 64, active_decode_tokens: 0 },
    },
    request: req("A"),
  },
  {
    name: "load_scale 2 makes the same cache worth more than the decode load (with load_scale 1 d1 would win)",
    type: "load-beats-cache",
    table: "dynamo-isl.msgpack",
    load_scale: 2,
    workers: [W("d0", "decode"), W("d1", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(256, 6)] } },
    index: [{ worker: "d0", prompt: "A", prefix_tokens: 128 }],
    loads: { d0: { active_prefill_tokens: 0, active_decode_tokens: 200 } },
    request: req("A"),
  },
  {
    name: "exact cost tie: cache + load on one worker equals no cache on the other; the first registered wins",
    type: "tie",
    table: "always-remote.msgpack",
    // registered z-dec first, a-dec second: the tie goes to index 0 (z-dec), not to the lexically smaller name
    workers: [W("z-dec", "decode"), W("a-dec", "decode"), W("z-pre", "prefill"), W("a-pre", "prefill")],
    prompts: { A: { tokens_formula: [lcg(160, 7)] } },
    index: [
      { worker: "z-dec", prompt: "A", prefix_tokens: 64 },
      { worker: "a-pre", prompt: "A", prefix_tokens: 32 },
    ],
    loads: {
      "z-dec": { active_prefill_tokens: 0, active_decode_tokens: 64 },
      "z-pre": { active_prefill_tokens: 0, active_decode_tokens: 0 },
      "a-pre": { active_prefill_tokens: 32, active_decode_tokens: 0 },
    },
    request: req("A"),
  },
  {
    name: "pinned decode worker (a session's): used although another worker holds more, PPD turn 2 with context given",
    type: "pinned",
    table: "ppd.msgpack",
    workers: [W("d0", "decode"), W("d1", "decode"), W("p0", "prefill")],
    prompts: { T2: { tokens_formula: [lcg(512, 8), lcg(128, 9)] } },
    index: [
      { worker: "d0", prompt: "T2", prefix_tokens: 512 },
      { worker: "d1", prompt: "T2", prefix_tokens: 256 },
    ],
    signals: { prefill_queue: 0, qps: 16 },
    request: req("T2", { osl_hat: 64, turn: 2, decode_worker: "d1", context_tokens: 512 }),
  },
  {
    name: "PPD turn 2 with context unknown: the decode worker's cached tokens are the context",
    type: "pinned",
    table: "ppd.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { T2: { tokens_formula: [lcg(1024, 10), lcg(96, 11)] } },
    index: [{ worker: "d0", prompt: "T2", prefix_tokens: 1024 }],
    signals: { prefill_queue: 0, qps: 3 },
    request: req("T2", { osl_hat: 100, turn: 2, decode_worker: "d0" }),
  },
  {
    name: "PPD turn 1: remote (first-turn) even with the whole prompt cached on the decode worker",
    type: "pinned",
    table: "ppd.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(320, 12)] } },
    index: [{ worker: "d0", prompt: "A", prefix_tokens: 320 }],
    request: req("A", { osl_hat: 100, turn: 1 }),
  },
  {
    name: "no prefill worker registered: the table says remote, the path is local",
    type: "no-prefill-worker",
    table: "always-remote.msgpack",
    workers: [W("d0", "decode"), W("d1", "decode")],
    prompts: { A: { tokens_formula: [lcg(100, 13)] } },
    index: [{ worker: "d1", prompt: "A", prefix_tokens: 48 }],
    request: req("A"),
  },
  {
    name: "a single both-role worker is never its own prefill worker: no prefill worker, local",
    type: "both-role",
    table: "dynamo-isl.msgpack",
    workers: [W("b0", "both")],
    prompts: { A: { tokens_formula: [lcg(4096, 14)] } },
    request: req("A"),
  },
  {
    name: "two both-role workers: the cheaper decodes, the other prefills; it is busy (dynamo-load), so local",
    type: "both-role",
    table: "dynamo-load.msgpack",
    workers: [W("b0", "both"), W("b1", "both")],
    prompts: { A: { tokens_formula: [lcg(200, 15)] } },
    index: [{ worker: "b1", prompt: "A", prefix_tokens: 160 }],
    // 6600 > prefill_busy_threshold 0.8 × max_num_batched_tokens 8192 = 6553.6
    loads: { b0: { active_prefill_tokens: 6600, active_decode_tokens: 200 } },
    request: req("A"),
  },
  {
    name: "both-role decode worker; of the other prefill workers the cheaper is picked, at exactly the busy threshold (not busy): remote",
    type: "both-role",
    table: "dynamo-load.msgpack",
    workers: [W("p0", "prefill"), W("b0", "both"), W("p1", "prefill"), W("d0", "decode")],
    prompts: { A: { tokens_formula: [lcg(640, 16)] } },
    index: [
      { worker: "b0", prompt: "A", prefix_tokens: 640 },
      { worker: "p0", prompt: "A", prefix_tokens: 640 },
    ],
    // p0 holds everything but is busier; p1 sits exactly at 0.8 × 8192 = 6553.6 active prefill tokens (busy is strict >)
    loads: {
      p0: { active_prefill_tokens: 8000, active_decode_tokens: 0 },
      p1: { active_prefill_tokens: 6553.6, active_decode_tokens: 0 },
    },
    request: req("A"),
  },
  ...islOrLoadScenarios(),
  {
    name: "LRU eviction: capacity 8 blocks; storing B after A evicts A's first 4 blocks, so A matches 0 there",
    type: "lru",
    table: "dynamo-isl.msgpack",
    workers: [W("d0", "decode", 8), W("d1", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(128, 17)] }, B: { tokens_formula: [lcg(64, 18)] } },
    index: [
      { worker: "d0", prompt: "A", prefix_tokens: 128 },
      { worker: "d0", prompt: "B", prefix_tokens: 64 },
      { worker: "d1", prompt: "A", prefix_tokens: 32 },
    ],
    request: req("A"),
  },
  {
    name: "LRU touch: re-storing A's first 2 blocks makes them recent, so B evicts A's blocks 2-3 instead",
    type: "lru",
    table: "dynamo-isl.msgpack",
    workers: [W("d0", "decode", 8), W("d1", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(128, 19)] }, B: { tokens_formula: [lcg(32, 20)] } },
    index: [
      { worker: "d0", prompt: "A", prefix_tokens: 128 },
      { worker: "d0", prompt: "A", prefix_tokens: 32 },
      { worker: "d0", prompt: "B", prefix_tokens: 32 },
    ],
    request: req("A"),
  },
  {
    name: "text mode: 64-byte blocks, isl = ceil(bytes / 4), 16 tokens per matched block, multi-byte UTF-8",
    type: "text",
    table: "dynamo-isl.msgpack",
    model: "meta-llama/Llama-3.1-8B-Instruct",
    salt: "tenant-a",
    workers: [W("d0", "decode"), W("d1", "decode"), W("p0", "prefill")],
    prompts: {
      S: {
        text_formula: [
          { kind: "repeat", unit: "System: you are a helpful assistant 🐬. ", count: 6 },
          { kind: "repeat", unit: "Q: é? ", count: 7 },
        ],
      },
    },
    index: [
      { worker: "d0", prompt: "S", prefix_bytes: 64 },
      { worker: "d1", prompt: "S", prefix_bytes: 192 },
    ],
    request: req("S"),
  },
  {
    name: "text mode with prompt_tokens 40 given, 4 blocks of 16 tokens matched: at most 39 tokens, 2 whole blocks, cached: eff_D 8",
    type: "text",
    table: "trtllm.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { S: { text: "The quick brown fox jumps over the lazy dog. ".repeat(6) } },
    index: [
      { worker: "d0", prompt: "S", prefix_bytes: 256 },
      { worker: "p0", prompt: "S", prefix_bytes: 64 },
    ],
    request: req("S", { prompt_tokens: 40 }),
  },
  {
    name: "trailing partial block: 5 full blocks + 7 tokens; all 5 cached, the 7 never are (block_size 16, model and salt root)",
    type: "partial-block",
    table: "trtllm.msgpack",
    model: "m",
    salt: "s",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(87, 21)] } },
    index: [{ worker: "d0", prompt: "A", prefix_tokens: 80 }],
    request: req("A"),
  },
  {
    name: "block_size 7 with a trailing partial block, dynamo-legacy with prefill_queue 1",
    type: "partial-block",
    table: "dynamo-legacy.msgpack",
    block_size: 7,
    workers: [W("d0", "decode"), W("d1", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(1400, 22), lcg(3, 23)] } },
    index: [{ worker: "d1", prompt: "A", prefix_tokens: 350 }],
    signals: { prefill_queue: 1, qps: 0 },
    request: req("A"),
  },
  {
    name: "vLLM's last token: a 32-token prompt (2 blocks) cached whole on both workers counts 16 cached tokens, not 32",
    type: "last-token",
    table: "dynamo-isl.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(32, 26)] } },
    index: [
      { worker: "d0", prompt: "A", prefix_tokens: 32 },
      { worker: "p0", prompt: "A", prefix_tokens: 32 },
    ],
    request: req("A"),
  },
  {
    name: "vLLM's last token: one token past 4 whole blocks, all cached: 64 cached tokens, eff_D 1",
    type: "last-token",
    table: "dynamo-isl.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(65, 27)] } },
    index: [{ worker: "d0", prompt: "A", prefix_tokens: 65 }],
    request: req("A"),
  },
  {
    name: "vLLM's last token: a one-block prompt cached whole counts nothing cached, so trtllm sees no match: remote",
    type: "last-token",
    table: "trtllm.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(16, 28)] } },
    index: [{ worker: "d0", prompt: "A", prefix_tokens: 16 }],
    request: req("A"),
  },
  {
    name: "vLLM's last token, text mode: 256 bytes (4 blocks, isl 64) cached whole on the prefill worker: eff_P 16",
    type: "last-token",
    table: "always-remote.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { S: { text_formula: [{ kind: "repeat", unit: "0123456789abcdef", count: 16 }] } },
    index: [
      { worker: "p0", prompt: "S", prefix_bytes: 256 },
      { worker: "d0", prompt: "S", prefix_bytes: 128 },
    ],
    request: req("S"),
  },
  {
    name: "vLLM's last token, block_size 7: 21 tokens (3 blocks) cached whole: 14 cached tokens, eff_D 7",
    type: "last-token",
    table: "dynamo-isl.msgpack",
    block_size: 7,
    workers: [W("d0", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(21, 29)] } },
    index: [{ worker: "d0", prompt: "A", prefix_tokens: 21 }],
    request: req("A"),
  },
  {
    name: "k-means table: features from the index, then the nearest centroid",
    type: "learned",
    table: "kmeans.msgpack",
    workers: [W("d0", "decode"), W("p0", "prefill"), W("p1", "prefill")],
    prompts: { A: { tokens_formula: [lcg(2048, 24)] } },
    index: [
      { worker: "d0", prompt: "A", prefix_tokens: 512 },
      { worker: "p1", prompt: "A", prefix_tokens: 1536 },
    ],
    request: req("A", { osl_hat: 512 }),
  },
  {
    name: "GMM table: features from the index, then the most likely component",
    type: "learned",
    table: "gmm.msgpack",
    workers: [W("d0", "decode"), W("d1", "decode"), W("p0", "prefill")],
    prompts: { A: { tokens_formula: [lcg(1200, 25)] } },
    index: [
      { worker: "d1", prompt: "A", prefix_tokens: 1024 },
      { worker: "p0", prompt: "A", prefix_tokens: 400 },
    ],
    loads: { d0: { active_prefill_tokens: 0, active_decode_tokens: 5000 } },
    request: req("A", { osl_hat: 2048 }),
  },
  ...loadBoundScenarios(),
  ...tierScenarios(),
];

/**
 * Table version 3 (kmeans-load.msgpack): uncached prompts whose cluster has a value (0 and 1) and bounds > 0, routed
 * with the chosen workers' loads below, at and above each bound, and without a prefill worker; then an
 * out-of-distribution prompt above both bounds (it keeps its reason) and a `rule` cluster's.
 */
function loadBoundScenarios() {
  const file = "kmeans-load.msgpack";
  const t = table(file);
  const found = new Map(); // value (0, 1, 2, "ood") → { n, osl, cluster }
  for (const n of [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]) {
    for (const osl of [16, 64, 256, 1024, 4096]) {
      const c = classify(t, [n, n, n, osl]);
      if (!(c.margin > MARGIN)) continue;
      const score = c.scores[c.best];
      const bound = t.ood_bound[c.best];
      if (!(Math.abs(score - bound) / Math.max(1, bound, score) > MARGIN)) continue;
      const key = score > bound ? "ood" : t.bits[c.best];
      if (!found.has(key) && (key !== 0 && key !== 1 ? true : t.load_bound.decode[c.best] > 0)) {
        found.set(key, { n, osl, cluster: c.best });
      }
    }
  }
  const out = [];
  const scenario = (what, pick, loads, workers = [W("d0", "decode"), W("p0", "prefill")]) => {
    const seed = 40 + out.length;
    out.push({
      name: `load bounds: ${what} (cluster ${pick.cluster})`,
      type: "load-bound",
      table: file,
      workers,
      prompts: { A: { tokens_formula: [lcg(pick.n, seed)] } },
      loads,
      request: req("A", { osl_hat: pick.osl }),
    });
  };
  for (const value of [0, 1]) {
    const pick = found.get(value);
    if (!pick) throw new Error(`kmeans-load: no uncached prompt lands in a cluster valued ${value}`);
    const bP = t.load_bound.prefill[pick.cluster];
    const bD = t.load_bound.decode[pick.cluster];
    const dHalf = Math.floor(bD / 2);
    scenario(`below both bounds, value ${value}`, pick, {
      d0: { active_prefill_tokens: Math.floor(bD / 4), active_decode_tokens: dHalf },
      p0: { active_prefill_tokens: Math.floor(bP / 2), active_decode_tokens: 0 },
    });
    scenario(`at both bounds exactly (not above), value ${value}`, pick, {
      d0: { active_prefill_tokens: 100, active_decode_tokens: bD - 100 },
      p0: { active_prefill_tokens: bP, active_decode_tokens: 0 },
    });
    scenario(`decode load (its active prefill + decode tokens) above the bound, value ${value}`, pick, {
      d0: { active_prefill_tokens: 100, active_decode_tokens: bD },
      p0: { active_prefill_tokens: 0, active_decode_tokens: 0 },
    });
    scenario(`prefill load above the bound, value ${value}`, pick, {
      d0: { active_prefill_tokens: 0, active_decode_tokens: 0 },
      p0: { active_prefill_tokens: bP + 1, active_decode_tokens: 0 },
    });
    scenario(
      `no prefill worker: the prefill load is not checked, value ${value}`,
      pick,
      { d0: { active_prefill_tokens: 0, active_decode_tokens: dHalf } },
      [W("d0", "decode")],
    );
    scenario(
      `no prefill worker, decode load above the bound, value ${value}`,
      pick,
      { d0: { active_prefill_tokens: 0, active_decode_tokens: bD + 1 } },
      [W("d0", "decode")],
    );
  }
  const above = {
    d0: { active_prefill_tokens: 0, active_decode_tokens: 1e6 },
    p0: { active_prefill_tokens: 1e6, active_decode_tokens: 0 },
  };
  if (found.has("ood")) scenario("out of distribution above both bounds keeps its reason", found.get("ood"), above);
  if (found.has(2)) scenario("a rule cluster above both bounds keeps rule-fallback", found.get(2), above);
  return out;
}

/**
 * Dynamo's isl_or_load (dynamo-isl-or-load.msgpack: isl_bounding 2048 / 0.7, prefill busy above 6000 active prefill
 * tokens, the decode-busy gate above 20000), both gates at and beyond their thresholds, and the same rule as a learned
 * table's fallback (kmeans-load-isl-or-load.msgpack: its four parameters reach the rule through the guard section).
 */
function islOrLoadScenarios() {
  const file = "dynamo-isl-or-load.msgpack";
  const A = { A: { tokens_formula: [lcg(4096, 60)] } };
  const dp = [W("d0", "decode"), W("p0", "prefill")];
  const load = (dPrefill, dDecode, pPrefill) => ({
    d0: { active_prefill_tokens: dPrefill, active_decode_tokens: dDecode },
    ...(pPrefill === undefined ? {} : { p0: { active_prefill_tokens: pPrefill, active_decode_tokens: 0 } }),
  });
  const cachedOnD = [{ worker: "d0", prompt: "A", prefix_tokens: 3840 }];
  const out = [
    ["the prefill worker is calm (5000 ≤ 6000) and isl_bounding says remote: remote", load(0, 100, 5000)],
    ["the prefill worker is exactly at 6000 (busy is strict >): remote", load(0, 100, 6000)],
    ["the prefill worker is busy (6001 > 6000), the decode worker is not: local", load(0, 100, 6001)],
    [
      "prefill busy, the decode worker exactly at the gate (1000 + 19000 = 20000, not above): local",
      load(1000, 19000, 7000),
    ],
    ["prefill busy, but the decode worker is above the gate (20001): the gate keeps it remote", load(0, 20001, 7000)],
    ["isl_bounding says local (3840 of 4096 cached on d0), the prefill worker calm: local", load(0, 100, 0), cachedOnD],
    [
      "isl_bounding says local, but the decode worker is above the gate (30000): remote",
      load(10000, 20000, 0),
      cachedOnD,
    ],
    [
      "no prefill worker: its load is unknown (calm), isl_bounding says remote: no prefill worker, local",
      load(0, 100),
      [],
      [W("d0", "decode")],
    ],
  ].map(([what, loads, index = [], workers = dp]) => ({
    name: `dynamo-isl-or-load: ${what}`,
    type: "isl-or-load",
    table: file,
    workers,
    prompts: A,
    index,
    loads,
    request: req("A"),
  }));
  // the learned table's rule cluster: an uncached prompt (isl_bounding 1024 / 0.5 says remote) decided by the fallback
  const learned = "kmeans-load-isl-or-load.msgpack";
  const t = table(learned);
  let pick = null;
  for (const n of [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]) {
    for (const osl of [16, 64, 256, 1024, 4096]) {
      const c = classify(t, [n, n, n, osl]);
      const score = c.scores[c.best];
      const bound = t.ood_bound[c.best];
      const clear = c.margin > MARGIN && Math.abs(score - bound) / Math.max(1, bound, score) > MARGIN;
      if (!pick && clear && score <= bound && t.bits[c.best] === 2) pick = { n, osl, cluster: c.best };
    }
  }
  if (!pick) throw new Error("kmeans-load-isl-or-load: no uncached prompt lands in a rule cluster");
  for (const [what, loads] of [
    ["the prefill worker calm: remote", load(0, 100, 100)],
    ["the prefill worker busy (6500 > 6000): local", load(0, 100, 6500)],
    ["prefill busy, the decode worker above the gate (25000 > 20000): remote", load(0, 25000, 6500)],
  ]) {
    out.push({
      name: `isl_or_load as a learned table's fallback (cluster ${pick.cluster}): ${what}`,
      type: "isl-or-load",
      table: learned,
      workers: dp,
      prompts: { A: { tokens_formula: [lcg(pick.n, 70 + out.length)] } },
      loads,
      request: req("A", { osl_hat: pick.osl }),
    });
  }
  return out;
}

/** Cache tiers (ABI 6): blocks offloaded to a lower tier (CPU) count at its weight, device blocks in full. */
function tierScenarios() {
  const A = { tokens_formula: [lcg(300, 31)] };
  const tiers = (name, workers, index, extra = {}) => ({
    name: `cache tiers: ${name}`,
    type: "tiers",
    table: "dynamo-isl.msgpack",
    workers: workers.map(([id, role]) => W(id, role)),
    prompts: { A },
    index: index.map(([worker, prefix_tokens, tier, remove]) => ({
      worker,
      prompt: "A",
      prefix_tokens,
      ...(tier ? { tier } : {}),
      ...(remove ? { remove } : {}),
    })),
    request: req("A"),
    ...extra,
  });
  const dd = [
    ["d0", "decode"],
    ["d1", "decode"],
    ["p0", "prefill"],
  ];
  const d = [
    ["d0", "decode"],
    ["p0", "prefill"],
  ];
  return [
    tiers("a longer prefix on CPU (16 blocks × 0.8) beats a shorter one on the device (12 blocks)", dd, [
      ["d0", 256, "CPU"],
      ["d1", 192],
    ]),
    tiers("the same prefix on the device beats it on CPU", dd, [
      ["d0", 256, "CPU"],
      ["d1", 256],
    ]),
    tiers("offloaded, then evicted from the device: the first 8 blocks count at 0.8, the next 8 in full", d, [
      ["d0", 256],
      ["d0", 256, "CPU"],
      ["d0", 128, "GPU", true],
    ]),
    tiers("removed from CPU, a block only offloaded is gone", d, [
      ["d0", 256, "CPU"],
      ["d0", 64],
      ["d0", 256, "CPU", true],
    ]),
    tiers(
      "with tier_weights CPU 0.5 the prefill worker holding 12 device blocks beats 20 CPU blocks",
      [
        ["d0", "decode"],
        ["p0", "prefill"],
        ["p1", "prefill"],
      ],
      [
        ["p0", 300, "CPU"],
        ["p1", 192],
      ],
      { tier_weights: { CPU: 0.5 } },
    ),
  ];
}

const routeCases = scenarios.map((s) => {
  const scn = { ...base, ...s, signals: { ...base.signals, ...(s.signals ?? {}) } };
  const ordered = {
    name: scn.name,
    type: scn.type,
    table: scn.table,
    block_size: scn.block_size,
    model: scn.model,
    salt: scn.salt,
    load_scale: scn.load_scale,
    ...(scn.tier_weights ? { tier_weights: scn.tier_weights } : {}),
    workers: scn.workers,
    prompts: scn.prompts,
    index: scn.index ?? [],
    loads: scn.loads ?? {},
    signals: scn.signals,
    request: scn.request,
  };
  return { ...ordered, expected: routeExpected(ordered) };
});

// ---------------------------------------------------------------------------------------------------------------

const doc = {
  description,
  tolerance: { standardized: 1e-9, scores: 1e-9, form: "|actual - expected| <= tol * max(1, |expected|)" },
  decide: decideCases,
  route: routeCases,
};
const out = fileURLToPath(new URL("./decisions.json", import.meta.url));
writeFileSync(out, JSON.stringify(doc, null, 1) + "\n");

const byType = {};
for (const c of routeCases) byType[c.type] = (byType[c.type] ?? 0) + 1;
console.log(`wrote ${decideCases.length} decide cases and ${routeCases.length} route cases to ${out}`);
console.log("decide cases per table:", countByTable);
console.log("clusters exercised:", Object.fromEntries(Object.entries(learnedClusters).map(([f, ks]) => [f, ks])));
console.log("route cases per type:", byType);
for (const c of routeCases)
  console.log(
    ` ${c.type.padEnd(18)} ${c.expected.path.padEnd(6)} bit ${c.expected.bit} ${c.expected.reason.padEnd(17)} D=${c.expected.decode_worker} P=${c.expected.prefill_worker} m=${c.expected.matched_blocks.decode}/${c.expected.matched_blocks.prefill} f=${JSON.stringify(c.expected.features)} cl=${c.expected.cluster} | ${c.name}`,
  );
