// The natural logarithm exactly as V8 computes Math.log (fdlibm's __ieee754_log, which V8 ships as
// base::ieee754::log), for the GMM constants staged in the core: AssemblyScript's Math.log (musl's table-driven
// log) differs from it in the last bit for some inputs, and the staged values must be bit-identical to
// src/table/staging.ts's, which the TypeScript reference engine and the learner use. Only staging calls it; the hot
// path keeps Math.log1p as before.

const LN2_HI = reinterpret<f64>(0x3fe62e42fee00000); // 6.93147180369123816490e-01
const LN2_LO = reinterpret<f64>(0x3dea39ef35793c76); // 1.90821492927058770002e-10
const TWO54 = reinterpret<f64>(0x4350000000000000); // 2^54
const LG1 = reinterpret<f64>(0x3fe5555555555593);
const LG2 = reinterpret<f64>(0x3fd999999997fa04);
const LG3 = reinterpret<f64>(0x3fd2492494229359);
const LG4 = reinterpret<f64>(0x3fcc71c51d8e78af);
const LG5 = reinterpret<f64>(0x3fc7466496cb03de);
const LG6 = reinterpret<f64>(0x3fc39a09d078c69f);
const LG7 = reinterpret<f64>(0x3fc2f112df3e5244);

// @ts-ignore: decorator
@inline function high(x: f64): i32 { return <i32>(reinterpret<u64>(x) >> 32); }
// @ts-ignore: decorator
@inline function low(x: f64): u32 { return <u32>reinterpret<u64>(x); }
// @ts-ignore: decorator
@inline function withHigh(x: f64, hi: i32): f64 { return reinterpret<f64>((<u64><u32>hi << 32) | <u64>low(x)); }

export function fdlibmLog(x: f64): f64 {
  let hx = high(x);
  const lx = low(x);
  let k = 0;
  if (hx < 0x00100000) { // x < 2^−1022
    if (((hx & 0x7fffffff) | <i32>lx) == 0) return -Infinity; // log(±0)
    if (hx < 0) return NaN; // log(negative)
    k -= 54;
    x *= TWO54; // subnormal: scale up
    hx = high(x);
  }
  if (hx >= 0x7ff00000) return x + x;
  k += (hx >> 20) - 1023;
  hx &= 0x000fffff;
  let i = (hx + 0x95f64) & 0x100000;
  x = withHigh(x, hx | (i ^ 0x3ff00000)); // normalize x or x/2
  k += i >> 20;
  const f = x - 1.0;
  if ((0x000fffff & (2 + hx)) < 3) { // |f| < 2^−20
    if (f == 0) {
      if (k == 0) return 0;
      const dk = <f64>k;
      return dk * LN2_HI + dk * LN2_LO;
    }
    const r = f * f * (0.5 - 0.33333333333333333 * f);
    if (k == 0) return f - r;
    const dk = <f64>k;
    return dk * LN2_HI - ((r - dk * LN2_LO) - f);
  }
  const s = f / (2.0 + f);
  const dk = <f64>k;
  const z = s * s;
  i = hx - 0x6147a;
  const w = z * z;
  const j = 0x6b851 - hx;
  const t1 = w * (LG2 + w * (LG4 + w * LG6));
  const t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)));
  i |= j;
  const r = t2 + t1;
  if (i > 0) {
    const hfsq = 0.5 * f * f;
    if (k == 0) return f - (hfsq - s * (hfsq + r));
    return dk * LN2_HI - ((hfsq - (s * (hfsq + r) + dk * LN2_LO)) - f);
  }
  if (k == 0) return f - s * (f - r);
  return dk * LN2_HI - ((s * (f - r) - dk * LN2_LO) - f);
}
