// log1p, operation for operation the one the WebAssembly core runs (AssemblyScript's NativeMath.log1p, a port
// of musl src/math/log1p.c; Sun fdlibm copyright: "Developed at SunSoft, a Sun Microsystems, Inc. business.
// Permission to use, copy, modify, and distribute this software is freely granted, provided that this notice is
// preserved."). JS engines' Math.log1p may differ in the last bit (V8 follows fdlibm's s_log1p.c), and one bit
// is enough to move a request across a cluster boundary, so the reference uses this port, not Math.log1p.

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer); // [lo, hi] on little-endian hosts (all we run on)

const ln2_hi = 6.9314718036912381649e-1; // 0x3FE62E42FEE00000
const ln2_lo = 1.90821492927058770002e-10; // 0x3DEA39EF35793C76
const Lg1 = 6.66666666666673513e-1;
const Lg2 = 3.999999999940941908e-1;
const Lg3 = 2.857142874366239149e-1;
const Lg4 = 2.222219843214978396e-1;
const Lg5 = 1.818357216161805012e-1;
const Lg6 = 1.531383769920937332e-1;
const Lg7 = 1.479819860511658591e-1;

export function log1p(x: number): number {
  f64[0] = x;
  const hx = u32[1]!;
  let k = 1;
  let c = 0;
  let f = 0;
  if (hx < 0x3fda827a || hx >>> 31 !== 0) {
    if (hx >= 0xbff00000) {
      if (x === -1) return -Infinity;
      return NaN;
    }
    if ((hx << 1) >>> 0 < (0x3ca00000 << 1) >>> 0) return x;
    if (hx <= 0xbfd2bec4) {
      k = 0;
      c = 0;
      f = x;
    }
  } else if (hx >= 0x7ff00000) return x;
  if (k !== 0) {
    f64[0] = 1 + x;
    const uf = f64[0];
    let hu = u32[1]!;
    hu = (hu + (0x3ff00000 - 0x3fe6a09e)) >>> 0;
    k = (hu >>> 20) - 0x3ff;
    if (k < 54) {
      c = k >= 2 ? 1 - (uf - x) : x - (uf - 1);
      c /= uf;
    } else c = 0;
    hu = ((hu & 0x000fffff) + 0x3fe6a09e) >>> 0;
    u32[1] = hu; // the low word is still that of 1 + x
    f = f64[0]! - 1;
  }
  const hfsq = 0.5 * f * f;
  const s = f / (2.0 + f);
  const z = s * s;
  const w = z * z;
  const t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  const r = t2 + t1;
  const dk = k;
  return s * (hfsq + r) + (dk * ln2_lo + c) - hfsq + f + dk * ln2_hi;
}
