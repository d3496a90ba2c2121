// The core's token hashing at the default 16-id blocks runs a software-pipelined loop (assembly/blocks.ts: block
// i+2 hashed while block i is chained) with a prologue and an epilogue; every block count around them, and a long
// prompt, must hash exactly as the TypeScript reference does, in the release build and the debug one, with and
// without a root.
import { describe, expect, it } from "vitest";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { coreModule } from "./helpers.js";

const CONFIG = { maxWorkers: 4, maxInputBytes: 1 << 18, indexBlocks: 0 };

function tokens(n: number, seed: number): Uint32Array {
  const out = new Uint32Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x ^ (x >>> 7); // every bit pattern, not only vocabulary-sized ids
  }
  return out;
}

describe("token hashing at 16-id blocks: wasm = reference", () => {
  for (const flavour of ["release", "debug"] as const) {
    for (const root of ["", "model\u0000salt"]) {
      it(`${flavour} core, ${root ? "with" : "without"} a root: 0..40 blocks with every tail, and 20,000 tokens`, () => {
        const wasm = createCore(instantiateCore(coreModule(flavour)), CONFIG);
        const ref = new ReferenceEngine(CONFIG);
        for (const e of [wasm, ref]) e.setRoot(new TextEncoder().encode(root));
        for (let n = 0; n <= 40 * 16 + 15; n++) {
          const t = tokens(n, n + 1);
          expect(wasm.hashTokens(t), `${n} tokens`).toEqual(ref.hashTokens(t));
        }
        const long = tokens(20_000, 42);
        expect(wasm.hashTokens(long)).toEqual(ref.hashTokens(long));
      });
    }
  }
});
