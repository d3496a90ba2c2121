// The output-length classifier (seeds 000/001: short / medium / long, each class mapped to a representative length):
// classes and representative lengths learned from training outputs, and a multinomial logistic regression over what
// is known at admission. The model is stored in the table (osl_model) and evaluated by the core, so the proxy, the
// Envoy filter and the browser predict exactly as training did. Also the oracle and noisy(p) predictors the
// ablations use to measure what misprediction costs.

import { Rng } from "../sim/rng.js";
import { classOf } from "../sim/simulator.js";
import { quantile } from "../sim/metrics.js";
import type { SimRequest } from "../sim/types.js";
import { OSL_MODEL_FEATURES, type OslClasses, type OslModel } from "../table/table.js";

/** What is known about a request at admission, plus (for training) its true output length. */
export interface OslSample {
  isl: number;
  /** longest cached prefix on any worker / prompt blocks, as the core measures it */
  reuse: number;
  turn: number;
  /** the session's previous output tokens (0 when none) */
  prevOutput: number;
  /** max_tokens (0 when not given) */
  maxTokens: number;
  outputTokens: number;
}

const CLASS_NAMES = ["short", "medium", "long"];

/** Tertile thresholds of the training outputs; each class's representative length is its median output. */
export function learnOslClasses(outputs: number[]): OslClasses {
  if (outputs.length === 0) throw new Error("learnOslClasses: no training outputs");
  const sorted = [...outputs].sort((a, b) => a - b);
  let thresholds = [quantile(sorted, 1 / 3, "lower"), quantile(sorted, 2 / 3, "lower")];
  if (!(thresholds[1]! > thresholds[0]!)) thresholds = [thresholds[0]!]; // too few distinct lengths for three classes
  const names = CLASS_NAMES.slice(0, thresholds.length + 1);
  const representative = names.map((_, c) => {
    const members = sorted.filter((x) => classOf(x, thresholds) === c);
    return members.length > 0 ? quantile(members, 0.5, "lower") : thresholds[Math.min(c, thresholds.length - 1)]!;
  });
  return { names, thresholds, representative };
}

/** The raw feature vector, computed exactly as assembly/osl.ts does. */
export function oslFeatures(s: Omit<OslSample, "outputTokens">): number[] {
  return [
    Math.log1p(s.isl),
    s.reuse,
    Math.log1p(s.turn),
    Math.log1p(s.prevOutput),
    s.maxTokens > 0 ? Math.log1p(s.maxTokens) : 0,
    s.maxTokens > 0 ? 1 : 0,
  ];
}

export interface OslTraining {
  classes: OslClasses;
  model: OslModel;
  /** share of held-out samples whose class the model predicts correctly, and of the majority class */
  accuracy: { heldOut: number; train: number; majorityBaseline: number };
  /** confusion[true][predicted] on the held-out samples */
  confusion: number[][];
  samples: { train: number; heldOut: number };
}

/** Trains on a seeded 80 % of the samples (full-batch gradient descent on the softmax loss, L2) and scores the rest. */
export function trainOslClassifier(
  samples: OslSample[],
  opts: { seed?: number; iterations?: number; l2?: number; learningRate?: number } = {},
): OslTraining {
  if (samples.length < 10) throw new Error(`trainOslClassifier: need at least 10 samples, got ${samples.length}`);
  const classes = learnOslClasses(samples.map((s) => s.outputTokens));
  const c = classes.names.length;
  const order = samples.map((_, i) => i);
  new Rng(opts.seed ?? 1, 7).shuffle(order);
  const cut = Math.max(1, Math.floor(samples.length * 0.8));
  const train = order.slice(0, cut).map((i) => samples[i]!);
  const test = order.slice(cut).map((i) => samples[i]!);

  const d = OSL_MODEL_FEATURES.length;
  const raw = train.map(oslFeatures);
  const mean = Array.from({ length: d }, (_, j) => raw.reduce((s, x) => s + x[j]!, 0) / raw.length);
  const std = Array.from({ length: d }, (_, j) => {
    const v = raw.reduce((s, x) => s + (x[j]! - mean[j]!) ** 2, 0) / raw.length;
    return v > 1e-12 ? Math.sqrt(v) : 1; // a constant feature (e.g. no max_tokens anywhere) stays harmless
  });
  const z = raw.map((x) => x.map((v, j) => (v - mean[j]!) / std[j]!));
  const y = train.map((s) => classOf(s.outputTokens, classes.thresholds));
  const w = Array.from({ length: c }, () => new Array<number>(d).fill(0));
  const b = new Array<number>(c).fill(0);
  const lr = opts.learningRate ?? 0.5;
  const l2 = opts.l2 ?? 1e-3;
  const iterations = opts.iterations ?? 400;
  const p = new Array<number>(c);
  for (let it = 0; it < iterations; it++) {
    const gw = Array.from({ length: c }, () => new Array<number>(d).fill(0));
    const gb = new Array<number>(c).fill(0);
    for (let i = 0; i < z.length; i++) {
      const xi = z[i]!;
      let maxS = -Infinity;
      for (let k = 0; k < c; k++) {
        let s = b[k]!;
        for (let j = 0; j < d; j++) s += w[k]![j]! * xi[j]!;
        p[k] = s;
        maxS = Math.max(maxS, s);
      }
      let sum = 0;
      for (let k = 0; k < c; k++) sum += p[k] = Math.exp(p[k]! - maxS);
      for (let k = 0; k < c; k++) {
        const g = p[k]! / sum - (y[i] === k ? 1 : 0);
        gb[k]! += g;
        for (let j = 0; j < d; j++) gw[k]![j]! += g * xi[j]!;
      }
    }
    for (let k = 0; k < c; k++) {
      b[k]! -= (lr * gb[k]!) / z.length;
      for (let j = 0; j < d; j++) w[k]![j]! -= lr * (gw[k]![j]! / z.length + l2 * w[k]![j]!);
    }
  }
  const model: OslModel = { kind: "logistic", features: [...OSL_MODEL_FEATURES], mean, std, weights: w, bias: b };
  const accuracyOf = (set: OslSample[]): number =>
    set.length === 0
      ? NaN
      : set.filter((s) => predictOslClass(model, s) === classOf(s.outputTokens, classes.thresholds)).length /
        set.length;
  const confusion = Array.from({ length: c }, () => new Array<number>(c).fill(0));
  for (const s of test) confusion[classOf(s.outputTokens, classes.thresholds)]![predictOslClass(model, s)]!++;
  const counts = new Array<number>(c).fill(0);
  for (const s of test) counts[classOf(s.outputTokens, classes.thresholds)]!++;
  return {
    classes,
    model,
    confusion,
    accuracy: {
      heldOut: accuracyOf(test),
      train: accuracyOf(train),
      majorityBaseline: test.length ? Math.max(...counts) / test.length : NaN,
    },
    samples: { train: train.length, heldOut: test.length },
  };
}

/** The class the model predicts (the core's argmax; ties → lower class). Math.log1p here, the core's log1p in routing. */
export function predictOslClass(m: OslModel, s: Omit<OslSample, "outputTokens">): number {
  const all = oslFeatures(s);
  const x = m.features.map((f) => all[OSL_MODEL_FEATURES.indexOf(f)]!);
  let best = 0;
  let bestScore = -Infinity;
  m.bias.forEach((bias, k) => {
    let sc = bias;
    x.forEach((v, j) => (sc += m.weights[k]![j]! * ((v - m.mean[j]!) / m.std[j]!)));
    if (sc > bestScore) {
      bestScore = sc;
      best = k;
    }
  });
  return best;
}

/** noisy(p): the true class's representative length, except that with probability p a different class's (seeded). */
export function noisyOslPredictor(classes: OslClasses, p: number, seed: number): (r: SimRequest) => number {
  if (!(p >= 0 && p <= 1)) throw new RangeError(`noisy(p): p must be in [0, 1], got ${p}`);
  const rng = new Rng(seed, 11);
  const c = classes.representative.length;
  return (r) => {
    const truth = classOf(r.outputTokens, classes.thresholds);
    if (c < 2 || rng.next() >= p) return classes.representative[truth]!;
    const other = (truth + 1 + rng.int(c - 1)) % c;
    return classes.representative[other]!;
  };
}
