// log1p of the four features, two lanes at a time, bit for bit what Math.log1p (AssemblyScript's port of musl's
// log1p.c) answers: classify takes log1pIntegers when all four features are whole numbers, as they nearly always
// are (musl's reduction branch alone, less what is exactly nothing for them), and log1pAnyFeatures otherwise.

// musl's log1p constants (standardize)
// @ts-ignore: decorator
@inline const LN2_HI: f64 = reinterpret<f64>(0x3FE62E42FEE00000);
// @ts-ignore: decorator
@inline const LN2_LO: f64 = reinterpret<f64>(0x3DEA39EF35793C76);
// @ts-ignore: decorator
@inline const LG1: f64 = reinterpret<f64>(0x3FE5555555555593);
// @ts-ignore: decorator
@inline const LG2: f64 = reinterpret<f64>(0x3FD999999997FA04);
// @ts-ignore: decorator
@inline const LG3: f64 = reinterpret<f64>(0x3FD2492494229359);
// @ts-ignore: decorator
@inline const LG4: f64 = reinterpret<f64>(0x3FCC71C51D8E78AF);
// @ts-ignore: decorator
@inline const LG5: f64 = reinterpret<f64>(0x3FC7466496CB03DE);
// @ts-ignore: decorator
@inline const LG6: f64 = reinterpret<f64>(0x3FC39A09D078C69F);
// @ts-ignore: decorator
@inline const LG7: f64 = reinterpret<f64>(0x3FC2F112DF3E5244);

// The splat constants of the log1p below, in memory: loading one is a single instruction, where V8 builds a splat
// of an immediate in two or three, and log1p of four lanes uses about fifty of them.
// @ts-ignore: decorator
@inline const C_NOT_FEATURE_HI = 0; // i64: above it the high word is ∞ or NaN
// @ts-ignore: decorator
@inline const C_ONE = 1;
// @ts-ignore: decorator
@inline const C_HU_BIAS = 2; // i64: 0x3FF00000 − 0x3FE6A09E
// @ts-ignore: decorator
@inline const C_EXPONENT_BIAS = 3; // i64: 0x3FF
// @ts-ignore: decorator
@inline const C_I64_ONE = 4;
// @ts-ignore: decorator
@inline const C_LOW_20_BITS = 5;
// @ts-ignore: decorator
@inline const C_SQRT_HALF_HI = 6; // i64: 0x3FE6A09E, the high word of √2/2
// @ts-ignore: decorator
@inline const C_LOW_32_BITS = 7;
// @ts-ignore: decorator
@inline const C_TWO_52_BITS = 8; // i64: the bits of 2^52
// @ts-ignore: decorator
@inline const C_TWO_52 = 9;
// @ts-ignore: decorator
@inline const C_SMALL_HI = 10; // i64: 0x3FDA827A, the high word of √2 − 1
// @ts-ignore: decorator
@inline const C_ZERO = 11;
// @ts-ignore: decorator
@inline const C_HALF = 12;
// @ts-ignore: decorator
@inline const C_TWO = 13;
// @ts-ignore: decorator
@inline const C_LG1 = 14; // LG1…LG7: 14…20
// @ts-ignore: decorator
@inline const C_LN2_LO = 21;
// @ts-ignore: decorator
@inline const C_LN2_HI = 22;
// @ts-ignore: decorator
@inline const C_TINY_HI = 23; // i64: 0x3CA00000, the high word of 2^−53
// @ts-ignore: decorator
@inline const C_HU_BIAS_HIGH_WORD = 24; // i64: C_HU_BIAS in the high word
// @ts-ignore: decorator
@inline const C_EXPONENT_BIAS_BITS = 25; // i64: 0x3FF << 52
// @ts-ignore: decorator
@inline const C_TWO_52_PLUS_BIAS = 26; // 2^52 + 0x3FF
// @ts-ignore: decorator
@inline const C_TWO_52_EXPONENT = 27; // i64: 0x433, the sign and exponent bits of 2^52
const LOG1P_CONSTANTS = memory.data<u64>([
  0x7FEFFFFF, 0x7FEFFFFF,
  reinterpret<u64>(1.0), reinterpret<u64>(1.0),
  0x3FF00000 - 0x3FE6A09E, 0x3FF00000 - 0x3FE6A09E,
  0x3FF, 0x3FF,
  1, 1,
  0x000FFFFF, 0x000FFFFF,
  0x3FE6A09E, 0x3FE6A09E,
  0xFFFFFFFF, 0xFFFFFFFF,
  0x4330000000000000, 0x4330000000000000,
  reinterpret<u64>(4503599627370496.0), reinterpret<u64>(4503599627370496.0),
  0x3FDA827A, 0x3FDA827A,
  reinterpret<u64>(0.0), reinterpret<u64>(0.0),
  reinterpret<u64>(0.5), reinterpret<u64>(0.5),
  reinterpret<u64>(2.0), reinterpret<u64>(2.0),
  reinterpret<u64>(LG1), reinterpret<u64>(LG1),
  reinterpret<u64>(LG2), reinterpret<u64>(LG2),
  reinterpret<u64>(LG3), reinterpret<u64>(LG3),
  reinterpret<u64>(LG4), reinterpret<u64>(LG4),
  reinterpret<u64>(LG5), reinterpret<u64>(LG5),
  reinterpret<u64>(LG6), reinterpret<u64>(LG6),
  reinterpret<u64>(LG7), reinterpret<u64>(LG7),
  reinterpret<u64>(LN2_LO), reinterpret<u64>(LN2_LO),
  reinterpret<u64>(LN2_HI), reinterpret<u64>(LN2_HI),
  0x3CA00000, 0x3CA00000,
  (<u64>(0x3FF00000 - 0x3FE6A09E)) << 32, (<u64>(0x3FF00000 - 0x3FE6A09E)) << 32,
  0x3FF0000000000000, 0x3FF0000000000000,
  reinterpret<u64>(4503599627370496.0 + 1023.0), reinterpret<u64>(4503599627370496.0 + 1023.0),
  0x433, 0x433,
], 16);

// log1pAnyFeatures' results (the general path, taken when a feature is not an integer): two values out of one call
export let log1pLo: v128 = v128.splat<i64>(0);
export let log1pHi: v128 = v128.splat<i64>(0);

/** Constant `i` of LOG1P_CONSTANTS (a constant address after inlining: one load). */
// @ts-ignore: decorator
@inline function constant(i: i32): v128 {
  return v128.load(LOG1P_CONSTANTS + (<usize>i << 4));
}

/** Whether either lane of x is negative (−0 included), infinite or NaN: not a feature, for Math.log1p instead. */
// @ts-ignore: decorator
@inline function notFeatureLanes(x: v128): v128 {
  return v128.or(i64x2.shr_u(x, 63), i64x2.gt_s(i64x2.shr_u(x, 32), constant(C_NOT_FEATURE_HI)));
}

/** Whether all four lanes are integers in [0, 2^52) (+0 included, −0 not): log1pIntegers' domain. */
// @ts-ignore: decorator
@inline export function integerLanes(a: v128, b: v128): bool {
  // sign and exponent below those of 2^52 (0x433): x in [0, 2^52), −0 not (its sign makes it 0x800), nor NaN or ∞
  const inA = v128.and(f64x2.eq(f64x2.floor(a), a), i64x2.lt_s(i64x2.shr_u(a, 52), constant(C_TWO_52_EXPONENT)));
  const inB = v128.and(f64x2.eq(f64x2.floor(b), b), i64x2.lt_s(i64x2.shr_u(b, 52), constant(C_TWO_52_EXPONENT)));
  return i64x2.all_true(v128.and(inA, inB));
}

/**
 * log1p of two integers in [0, 2^52): the reduction branch of musl's log1p, operation for operation, less what is
 * exactly nothing for them. 1 + x is exact, so the rounding correction c is +0 (k ≥ 2: 1 − ((1 + x) − x) = 1 − 1;
 * k < 2: x − ((1 + x) − 1) = x − x; then +0 / (1 + x)), and dk × ln2_lo + c is dk × ln2_lo. x = 0 takes the
 * reduction too (k = 0, f = 0: every term +0, so +0 = x, as the x < 2^−53 branch answers). The reduced 1 + f is
 * 1 + x with its exponent lowered by k (musl's hu = (hu & 0xFFFFF) + 0x3FE6A09E is hi(1 + x) − (k << 20)).
 */
// @ts-ignore: decorator
@inline export function log1pIntegers(x: v128): v128 {
  const one = constant(C_ONE);
  const uf = f64x2.add(one, x);
  const biasedK = i64x2.shr_u(i64x2.add(uf, constant(C_HU_BIAS_HIGH_WORD)), 52); // k + 0x3FF
  const f = f64x2.sub(i64x2.sub(i64x2.add(uf, constant(C_EXPONENT_BIAS_BITS)), i64x2.shl(biasedK, 52)), one);
  // <f64>k exactly: (2^52 + k + 0x3FF) − (2^52 + 0x3FF)
  const dk = f64x2.sub(v128.or(biasedK, constant(C_TWO_52_BITS)), constant(C_TWO_52_PLUS_BIAS));
  const hfsq = f64x2.mul(f64x2.mul(constant(C_HALF), f), f);
  const s = f64x2.div(f, f64x2.add(constant(C_TWO), f));
  const z = f64x2.mul(s, s);
  const w = f64x2.mul(z, z);
  const t1 = f64x2.mul(w, f64x2.add(constant(C_LG1 + 1), f64x2.mul(w, f64x2.add(constant(C_LG1 + 3), f64x2.mul(w, constant(C_LG1 + 5))))));
  const t2 = f64x2.mul(z, f64x2.add(constant(C_LG1), f64x2.mul(w, f64x2.add(constant(C_LG1 + 2),
    f64x2.mul(w, f64x2.add(constant(C_LG1 + 4), f64x2.mul(w, constant(C_LG1 + 6))))))));
  const r = f64x2.add(t2, t1);
  const y = f64x2.add(f64x2.mul(s, f64x2.add(hfsq, r)), f64x2.mul(dk, constant(C_LN2_LO)));
  return f64x2.add(f64x2.add(f64x2.sub(y, hfsq), f), f64x2.mul(dk, constant(C_LN2_HI)));
}

/** Math.log1p of each lane: classify's fallback for what no feature is (but never a wrong answer either). */
function log1pEachLane(x: v128): v128 {
  return f64x2(Math.log1p(f64x2.extract_lane(x, 0)), Math.log1p(f64x2.extract_lane(x, 1)));
}

/**
 * log1p of the features in two pairs (a: isl, eff_P; b: eff_D, osl_hat) into log1pLo and log1pHi, for any features
 * (classify takes log1pIntegers when all four are integers, as they nearly always are).
 *
 * log1p is bit-identical to Math.log1p (AssemblyScript's port of musl's log1p.c) for finite x ≥ 0 (the only
 * features there are; anything else goes to log1pEachLane): the same operations in the same order, its three
 * branches (x < 2^−53: x itself; x < 0.4142: f = x, k = c = 0; else the reduction of 1 + x) computed for both
 * lanes and selected. Two lanes share each division, the costliest step (two per log1p), and the two pairs' steps
 * are written side by side (A, B): the computation is one long chain of dependent operations per pair, and
 * interleaved the CPU runs the two chains together instead of mostly one after the other (5% of a decide).
 */
export function log1pAnyFeatures(a: v128, b: v128): void {
  if (v128.any_true(v128.or(notFeatureLanes(a), notFeatureLanes(b)))) {
    log1pLo = log1pEachLane(a);
    log1pHi = log1pEachLane(b);
  } else {
    const hxA = i64x2.shr_u(a, 32);
    const hxB = i64x2.shr_u(b, 32);
    const one = constant(C_ONE);
    // x ≥ 0.4142…: 1 + x = 2^k × (1 + f) with √2/2 ≤ 1 + f < √2, and c corrects the rounding of 1 + x
    const ufA = f64x2.add(one, a);
    const ufB = f64x2.add(one, b);
    let huA = i64x2.add(i64x2.shr_u(ufA, 32), constant(C_HU_BIAS));
    let huB = i64x2.add(i64x2.shr_u(ufB, 32), constant(C_HU_BIAS));
    const kA = i64x2.sub(i64x2.shr_u(huA, 20), constant(C_EXPONENT_BIAS)); // 0 ≤ k < 54 for these x
    const kB = i64x2.sub(i64x2.shr_u(huB, 20), constant(C_EXPONENT_BIAS));
    const cA = f64x2.div(
      v128.bitselect(f64x2.sub(one, f64x2.sub(ufA, a)), f64x2.sub(a, f64x2.sub(ufA, one)), i64x2.gt_s(kA, constant(C_I64_ONE))),
      ufA,
    );
    const cB = f64x2.div(
      v128.bitselect(f64x2.sub(one, f64x2.sub(ufB, b)), f64x2.sub(b, f64x2.sub(ufB, one)), i64x2.gt_s(kB, constant(C_I64_ONE))),
      ufB,
    );
    huA = i64x2.add(v128.and(huA, constant(C_LOW_20_BITS)), constant(C_SQRT_HALF_HI));
    huB = i64x2.add(v128.and(huB, constant(C_LOW_20_BITS)), constant(C_SQRT_HALF_HI));
    const reducedA = f64x2.sub(v128.or(i64x2.shl(huA, 32), v128.and(ufA, constant(C_LOW_32_BITS))), one);
    const reducedB = f64x2.sub(v128.or(i64x2.shl(huB, 32), v128.and(ufB, constant(C_LOW_32_BITS))), one);
    // <f64>k exactly: 2^52 + k has k in its low bits
    const kfA = f64x2.sub(v128.or(kA, constant(C_TWO_52_BITS)), constant(C_TWO_52));
    const kfB = f64x2.sub(v128.or(kB, constant(C_TWO_52_BITS)), constant(C_TWO_52));
    // x < 0.4142…: no reduction
    const smallA = i64x2.lt_s(hxA, constant(C_SMALL_HI));
    const smallB = i64x2.lt_s(hxB, constant(C_SMALL_HI));
    const zero = constant(C_ZERO);
    const fA = v128.bitselect(a, reducedA, smallA);
    const fB = v128.bitselect(b, reducedB, smallB);
    const ccA = v128.bitselect(zero, cA, smallA);
    const ccB = v128.bitselect(zero, cB, smallB);
    const dkA = v128.bitselect(zero, kfA, smallA);
    const dkB = v128.bitselect(zero, kfB, smallB);
    const hfsqA = f64x2.mul(f64x2.mul(constant(C_HALF), fA), fA);
    const hfsqB = f64x2.mul(f64x2.mul(constant(C_HALF), fB), fB);
    const sA = f64x2.div(fA, f64x2.add(constant(C_TWO), fA));
    const sB = f64x2.div(fB, f64x2.add(constant(C_TWO), fB));
    const zA = f64x2.mul(sA, sA);
    const zB = f64x2.mul(sB, sB);
    const wA = f64x2.mul(zA, zA);
    const wB = f64x2.mul(zB, zB);
    // t1 = w(LG2 + w(LG4 + w LG6)), t2 = z(LG1 + w(LG3 + w(LG5 + w LG7)))
    const t1A = f64x2.mul(wA, f64x2.add(constant(C_LG1 + 1), f64x2.mul(wA, f64x2.add(constant(C_LG1 + 3), f64x2.mul(wA, constant(C_LG1 + 5))))));
    const t1B = f64x2.mul(wB, f64x2.add(constant(C_LG1 + 1), f64x2.mul(wB, f64x2.add(constant(C_LG1 + 3), f64x2.mul(wB, constant(C_LG1 + 5))))));
    const t2A = f64x2.mul(zA, f64x2.add(constant(C_LG1), f64x2.mul(wA, f64x2.add(constant(C_LG1 + 2),
      f64x2.mul(wA, f64x2.add(constant(C_LG1 + 4), f64x2.mul(wA, constant(C_LG1 + 6))))))));
    const t2B = f64x2.mul(zB, f64x2.add(constant(C_LG1), f64x2.mul(wB, f64x2.add(constant(C_LG1 + 2),
      f64x2.mul(wB, f64x2.add(constant(C_LG1 + 4), f64x2.mul(wB, constant(C_LG1 + 6))))))));
    const rA = f64x2.add(t2A, t1A);
    const rB = f64x2.add(t2B, t1B);
    // s × (hfsq + r) + (dk × ln2_lo + c) − hfsq + f + dk × ln2_hi, left to right
    let yA = f64x2.add(f64x2.mul(sA, f64x2.add(hfsqA, rA)), f64x2.add(f64x2.mul(dkA, constant(C_LN2_LO)), ccA));
    let yB = f64x2.add(f64x2.mul(sB, f64x2.add(hfsqB, rB)), f64x2.add(f64x2.mul(dkB, constant(C_LN2_LO)), ccB));
    yA = f64x2.add(f64x2.add(f64x2.sub(yA, hfsqA), fA), f64x2.mul(dkA, constant(C_LN2_HI)));
    yB = f64x2.add(f64x2.add(f64x2.sub(yB, hfsqB), fB), f64x2.mul(dkB, constant(C_LN2_HI)));
    // x < 2^−53 (0 included): log1p(x) is x
    log1pLo = v128.bitselect(a, yA, i64x2.lt_s(hxA, constant(C_TINY_HI)));
    log1pHi = v128.bitselect(b, yB, i64x2.lt_s(hxB, constant(C_TINY_HI)));
  }
}
