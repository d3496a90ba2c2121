// Block hashes at the edge: users hand them over as bigint, 16-digit hex strings, a BigUint64Array, or (lo, hi)
// u32 pairs; inside, they are pairs, the layout of u64s in WebAssembly memory.

import { fromHex } from "./reference/xxh64.js";

export { pairsToHex } from "./reference/blocks.js";

export type HashesInput = Uint32Array | BigUint64Array | readonly (bigint | string | number)[];

const TWO_64 = 1n << 64n;

/** (lo, hi) pairs for any accepted form. A Uint32Array is taken to be pairs already. */
export function toPairs(hashes: HashesInput, what = "hashes"): Uint32Array {
  if (hashes instanceof Uint32Array) {
    if ((hashes.length & 1) !== 0) throw new TypeError(`${what}: a Uint32Array of hash pairs must have an even length`);
    return hashes;
  }
  if (hashes instanceof BigUint64Array) {
    return new Uint32Array(hashes.buffer, hashes.byteOffset, hashes.length * 2).slice();
  }
  if (!Array.isArray(hashes)) throw new TypeError(`${what}: expected an array of hashes`);
  const out = new Uint32Array(hashes.length * 2);
  for (let i = 0; i < hashes.length; i++) {
    const h = hashes[i];
    if (typeof h === "string") {
      let p: { lo: number; hi: number };
      try {
        p = fromHex(h);
      } catch {
        throw new TypeError(`${what}[${i}]: expected 16 hex digits, got ${JSON.stringify(h)}`);
      }
      out[2 * i] = p.lo;
      out[2 * i + 1] = p.hi;
      continue;
    }
    let b: bigint;
    if (typeof h === "bigint") b = h;
    else if (typeof h === "number" && Number.isSafeInteger(h)) b = BigInt(h);
    else throw new TypeError(`${what}[${i}]: expected a bigint, a safe integer or 16 hex digits, got ${String(h)}`);
    // vLLM publishes block hashes as signed or unsigned 64-bit ints; both name the same 64 bits
    if (b < -(1n << 63n) || b >= TWO_64) throw new RangeError(`${what}[${i}]: ${b} does not fit in 64 bits`);
    b = BigInt.asUintN(64, b);
    out[2 * i] = Number(b & 0xffffffffn);
    out[2 * i + 1] = Number(b >> 32n);
  }
  return out;
}

export function pairsToBigInts(pairs: Uint32Array): bigint[] {
  const out: bigint[] = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) out.push((BigInt(pairs[i + 1]!) << 32n) | BigInt(pairs[i]!));
  return out;
}
