// SplitMix32, the one mixing step shared by the simulator's seeded generator (src/sim/rng.ts seeds xoshiro128** with
// it) and the drift guard's control coin (src/router/drift-guard.ts). Its own file so the package entry, which `dolphin hash`
// and `dolphin route` load, reaches it without the simulator.

/** The Weyl increment SplitMix adds to its counter each step (2^32 / φ). */
export const SPLITMIX_GAMMA = 0x9e3779b9;

/** splitmix32 step (a 32-bit variant of Steele, Lea & Flood's SplitMix): the next well-mixed word of a counter. */
export function splitmix32(x: number): number {
  let z = (x + SPLITMIX_GAMMA) | 0;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}
