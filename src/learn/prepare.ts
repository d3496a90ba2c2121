// Everything before the search (seeds 000/001): log the four features of a run under the environment's reference
// routing, learn the output-length classifier, cluster the standardized log1p features (k-means or a Gaussian
// mixture), and hand the search a table maker, the initial bits (what the reference routing did to most of each
// cluster) and the environment with the chosen output-length predictor.

import { classOf } from "../sim/simulator.js";
import type { OslPredictor } from "../sim/sim-config.js";
import { versionNeeded } from "../table/codec.js";
import { FEATURE_NAMES, type Fallback, type FeatureName, type Table } from "../table/table.js";
import { validateTable } from "../table/validate.js";
import type { Environment } from "./environment.js";
import { fitGmm } from "./gmm.js";
import { oodBounds, type GuardedTableMaker } from "./guard.js";
import { fitKMeans } from "./kmeans.js";
import type { LearningEnvironment } from "./learning-environment.js";
import { noisyOslPredictor, predictOslClass, trainOslClassifier, type OslTraining } from "./osl.js";
import { fitScaler, standardize } from "./scaler.js";
import type { OslMode, TrainOptions } from "./train-options.js";

const PLACEHOLDER_CHECKSUM = "xxh64:0000000000000000";

/** Everything before the search: features, classifier, clusters, the table maker and the initial bits. */
export interface Prepared {
  /** a table with these cluster values (0 local, 1 remote, 2 rule: with `guard`, plus the out-of-distribution bounds)
   *  and, where given, this fallback rule (absent: the default, Dynamo's isl_bounding) */
  makeTable: GuardedTableMaker;
  initial: number[];
  /** the environment the search runs in (with the output-length predictor of the chosen mode) */
  env: Environment;
  /** another environment (the guard's held-out arrivals) with the same output-length predictor */
  withPredictor: (e: Environment & Pick<LearningEnvironment, "withOslPredictor">) => Environment;
  /** null where the environment observes no output lengths (a live cluster) */
  osl: OslTraining | null;
  clusterSizes: number[];
  /** the routing the features were logged under, and how many requests were logged */
  featureRun: { policy: string; requests: number };
}

/** Logs the features of a run under the environment's reference routing, learns the classifier and the clusters. */
export async function prepare(env: LearningEnvironment, opts: TrainOptions = {}): Promise<Prepared> {
  const k = opts.k ?? 8;
  const seed = opts.seed ?? 1;
  const oslMode = opts.osl ?? "model";

  // 1. features as the core computes them, from a run under the environment's reference routing
  const log = await env.logFeatures();
  const logged = log.requests;
  if (logged.length < k)
    throw new Error(`train: only ${logged.length} requests logged under ${log.policy}; need at least K = ${k}`);
  const samples = logged.every((r) => r.osl !== undefined) ? logged.map((r) => r.osl!) : null;
  const features = opts.features ?? (samples ? [...FEATURE_NAMES] : FEATURE_NAMES.filter((f) => f !== "osl_hat"));
  if (!samples && features.includes("osl_hat"))
    throw new Error(`train: osl_hat needs output lengths, which ${env.describe.tool} does not observe`);

  // 2. the output-length classifier (where outputs are observed)
  const osl = samples ? trainOslClassifier(samples, { seed }) : null;
  const oslHat = (i: number): number => {
    if (!osl || !samples) return NaN; // not a feature without a classifier (checked above)
    const s = samples[i]!;
    if (oslMode === "model") return osl.classes.representative[predictOslClass(osl.model, s)]!;
    return osl.classes.representative[classOf(s.outputTokens, osl.classes.thresholds)]!; // oracle, and noisy(p)'s view on average
  };
  const rows = logged.map((r, i) => {
    const all: Record<FeatureName, number> = {
      isl: r.isl,
      eff_P: r.effP,
      eff_D: r.effD,
      osl_hat: features.includes("osl_hat") ? oslHat(i) : NaN,
    };
    return features.map((f) => all[f]);
  });

  // 3. clusters
  const scaler = fitScaler(rows);
  const z = standardize(rows, scaler);
  const algo = opts.algo ?? "kmeans";
  const model = algo === "kmeans" ? fitKMeans(z, k, { seed }) : fitGmm(z, k, { seed });
  const assignments = model.assignments;
  const clusterSizes = new Array<number>(k).fill(0);
  for (const a of assignments) clusterSizes[a]!++;
  // initial bits: what the reference routing did to most of each cluster's requests
  const remoteVotes = new Array<number>(k).fill(0);
  logged.forEach((r, i) => {
    if (r.path === "remote") remoteVotes[assignments[i]!]!++;
  });
  const initial = clusterSizes.map((n, c) => (remoteVotes[c]! * 2 >= n ? 1 : 0));

  const { tool, slo } = env.describe;
  const oslNote = osl ? `; osl ${typeof oslMode === "string" ? oslMode : `noisy(${oslMode.noisy})`}` : "";
  const oodBound = opts.guard ? oodBounds(z, model, opts.guard.oodQuantile ?? 0.99) : undefined;
  const makeTable = (bits: number[], fallback?: Fallback): Table =>
    validateTable({
      format: "dolphin-routing.table",
      version: versionNeeded({ bits, ood_bound: oodBound, fallback }),
      kind: algo,
      features,
      scaler,
      centroids: model.kind === "kmeans" ? model.centroids : model.means,
      ...(model.kind === "gmm" ? { variances: model.variances, weights: model.weights } : {}),
      bits,
      ...(fallback ? { fallback } : {}),
      ...(oodBound ? { ood_bound: oodBound } : {}),
      ...(osl ? { osl_classes: osl.classes } : {}),
      ...(osl && oslMode === "model" ? { osl_model: osl.model } : {}),
      ...(opts.provenance?.split ? { split: opts.provenance.split } : {}),
      slo: { ttft_ms: slo.ttftMs, tpot_ms: slo.tpotMs },
      provenance: {
        tool,
        created: new Date().toISOString(),
        workload: opts.provenance?.workload ?? env.describe.workload,
        seed,
        notes: opts.provenance?.notes ?? `${algo} K=${k} over ${features.join(", ")}${oslNote}`,
      },
      checksum: PLACEHOLDER_CHECKSUM,
    });

  // the environment (and the guard's held-out one) sees the predictor this mode stands for
  const withPredictor = (e: Environment & Pick<LearningEnvironment, "withOslPredictor">): Environment => {
    if (!osl || oslMode === "model") return e;
    if (!e.withOslPredictor)
      throw new Error(`train: ${env.describe.tool} cannot replace the router's output-length predictor`);
    return e.withOslPredictor(predictorFor(oslMode, osl, seed));
  };
  const envFor = withPredictor(env);

  return {
    makeTable,
    initial,
    env: envFor,
    withPredictor,
    osl,
    clusterSizes,
    featureRun: { policy: log.policy, requests: logged.length },
  };
}

function predictorFor(mode: OslMode, osl: OslTraining, seed: number): OslPredictor {
  if (mode === "model") return "model";
  if (mode === "oracle") return "oracle";
  return noisyOslPredictor(osl.classes, mode.noisy, seed);
}
