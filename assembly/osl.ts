// The output-length classifier, evaluated in the core so every host predicts exactly as training did: a
// multinomial logistic regression over what is known at admission, whose most likely class maps to that class's
// representative length (osl_hat). Features (by index): 0 log1p(isl), 1 prefix reuse (the longest cached prefix
// on any worker / the prompt's blocks), 2 log1p(turn), 3 log1p(the session's previous output tokens),
// 4 log1p(max_tokens), 5 max_tokens given (0/1). The host supplies 3–5; the core computes 0–2.

import { E_BAD_FEATURE, E_BAD_K, E_BAD_NUMBER, E_BAD_PARAM, OK } from "./generated/abi";
import { fail } from "./errors";

// @ts-ignore: decorator
@inline export const OSL_FEATURES: i32 = 6;
// @ts-ignore: decorator
@inline export const MAX_OSL_CLASSES: i32 = 16;

let classes: i32 = 0; // 0: no model
let dims: i32 = 0;
let featureIdx: usize = 0; // i32[OSL_FEATURES]
let mean: usize = 0; // f64[OSL_FEATURES]
let std: usize = 0;
let weights: usize = 0; // f64[MAX_OSL_CLASSES * OSL_FEATURES]
let bias: usize = 0; // f64[MAX_OSL_CLASSES]
let representative: usize = 0; // f64[MAX_OSL_CLASSES]
let x: usize = 0; // f64[OSL_FEATURES]: the raw features of the current request
export let lastClass: i32 = -1;

export function oslInit(): void {
  featureIdx = heap.alloc(<usize>OSL_FEATURES << 2);
  mean = heap.alloc(<usize>OSL_FEATURES << 3);
  std = heap.alloc(<usize>OSL_FEATURES << 3);
  weights = heap.alloc(<usize>(MAX_OSL_CLASSES * OSL_FEATURES) << 3);
  bias = heap.alloc(<usize>MAX_OSL_CLASSES << 3);
  representative = heap.alloc(<usize>MAX_OSL_CLASSES << 3);
  x = heap.alloc(<usize>OSL_FEATURES << 3);
}

export function oslClasses(): i32 { return classes; }

export function clearOslModel(): void {
  classes = 0;
  dims = 0;
}

/** Length of the staged osl section that starts at `at` (0 when absent). Layout: F C idx[F] mean[F] std[F] W[C×F] b[C] rep[C]. */
function sectionLength(f: i32, c: i32): i32 {
  return 2 + 3 * f + c * f + 2 * c;
}

/** Validates the staged osl section at f64 index `at` of `staging` (F = 0 means "no model"). Returns OK or a code. */
export function checkOslSection(staging: usize, at: i32, limit: i32): i32 {
  if (at < 0 || at + 2 > limit) return fail(E_BAD_PARAM, at);
  const fF = load<f64>(staging + (<usize>at << 3));
  const cF = load<f64>(staging + (<usize>(at + 1) << 3));
  if (fF == 0) return OK;
  if (!(fF >= 1 && fF <= <f64>OSL_FEATURES) || fF != Math.floor(fF)) return fail(E_BAD_FEATURE, at);
  if (!(cF >= 1 && cF <= <f64>MAX_OSL_CLASSES) || cF != Math.floor(cF)) return fail(E_BAD_K, cF);
  const f = <i32>fF;
  const c = <i32>cF;
  if (at + sectionLength(f, c) > limit) return fail(E_BAD_PARAM, at);
  let seen = 0;
  for (let j = 0; j < f; j++) {
    const v = load<f64>(staging + (<usize>(at + 2 + j) << 3));
    if (!(v >= 0 && v < <f64>OSL_FEATURES) || v != Math.floor(v) || (seen & (1 << <i32>v)) != 0) return fail(E_BAD_FEATURE, j);
    seen |= 1 << <i32>v;
  }
  for (let i = at + 2 + f; i < at + sectionLength(f, c); i++) {
    if (!isFinite(load<f64>(staging + (<usize>i << 3)))) return fail(E_BAD_NUMBER, i);
  }
  for (let j = 0; j < f; j++) if (!(load<f64>(staging + (<usize>(at + 2 + 2 * f + j) << 3)) > 0)) return fail(E_BAD_NUMBER, at + 2 + 2 * f + j);
  const repAt = at + 2 + 3 * f + c * f + c;
  for (let i = 0; i < c; i++) if (!(load<f64>(staging + (<usize>(repAt + i) << 3)) >= 0)) return fail(E_BAD_NUMBER, repAt + i);
  return OK;
}

/** Makes the (already checked) staged section the active model. */
export function applyOslSection(staging: usize, at: i32): void {
  const f = <i32>load<f64>(staging + (<usize>at << 3));
  if (f == 0) {
    classes = 0;
    dims = 0;
    return;
  }
  const c = <i32>load<f64>(staging + (<usize>(at + 1) << 3));
  for (let j = 0; j < f; j++) {
    store<i32>(featureIdx + (<usize>j << 2), <i32>load<f64>(staging + (<usize>(at + 2 + j) << 3)));
  }
  memory.copy(mean, staging + (<usize>(at + 2 + f) << 3), <usize>f << 3);
  memory.copy(std, staging + (<usize>(at + 2 + 2 * f) << 3), <usize>f << 3);
  memory.copy(weights, staging + (<usize>(at + 2 + 3 * f) << 3), <usize>(c * f) << 3);
  memory.copy(bias, staging + (<usize>(at + 2 + 3 * f + c * f) << 3), <usize>c << 3);
  memory.copy(representative, staging + (<usize>(at + 2 + 3 * f + c * f + c) << 3), <usize>c << 3);
  classes = c;
  dims = f;
}

/** The predicted output length; sets lastClass. Only called when a model is loaded. */
export function predictOsl(isl: f64, reuse: f64, turn: f64, prevOutput: f64, maxTokens: f64): f64 {
  store<f64>(x, Math.log1p(isl));
  store<f64>(x, reuse, 8);
  store<f64>(x, Math.log1p(turn), 16);
  store<f64>(x, Math.log1p(prevOutput), 24);
  store<f64>(x, maxTokens > 0 ? Math.log1p(maxTokens) : 0, 32);
  store<f64>(x, maxTokens > 0 ? 1 : 0, 40);
  let best = 0;
  let bestScore = -Infinity;
  for (let k = 0; k < classes; k++) {
    let s = load<f64>(bias + (<usize>k << 3));
    const row = weights + (<usize>(k * dims) << 3);
    for (let j = 0; j < dims; j++) {
      const v = load<f64>(x + (<usize>load<i32>(featureIdx + (<usize>j << 2)) << 3));
      s += load<f64>(row + (<usize>j << 3)) * ((v - load<f64>(mean + (<usize>j << 3))) / load<f64>(std + (<usize>j << 3)));
    }
    if (s > bestScore) { bestScore = s; best = k; }
  }
  lastClass = best;
  return load<f64>(representative + (<usize>best << 3));
}
