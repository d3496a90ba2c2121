// The engines' copy-free paths: hashes into the caller's buffer (hashTokens / hashText with `out`), a prompt written
// straight into the input buffer and hashed or routed where it is (inputTokens, inputText, hashInputTokens), and
// the Router using them for arrays of ids and for text. Each must give exactly what the copying path gives, in
// both engines, and reject what it cannot hold with the same errors.
import { describe, expect, it } from "vitest";
import { Flag, type Engine, type RouteInput } from "../src/contract/core-api.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ReferenceEngine } from "../src/reference/engine.js";
import { stageTable } from "../src/table/staging.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule, routerOn } from "./helpers.js";

const CONFIG = { maxWorkers: 4, maxInputBytes: 4096, indexBlocks: 64 };

function tokens(n: number, seed: number): Uint32Array {
  const out = new Uint32Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x ^ (x >>> 7);
  }
  return out;
}

const engines = (): Engine[] => [
  createCore(instantiateCore(coreModule("release")), CONFIG),
  createCore(instantiateCore(coreModule("debug")), CONFIG),
  new ReferenceEngine(CONFIG),
];

function routeInput(flags: number, data: Uint32Array | Uint8Array, length: number): RouteInput {
  return {
    flags,
    data,
    length,
    promptTokens: 0,
    oslHat: 100,
    turn: 1,
    pinnedDecode: -1,
    contextTokens: -1,
    prevOutputTokens: 0,
    maxTokens: 0,
  };
}

describe("copy-free hashing and routing inputs", () => {
  it("hashTokens and hashText into a caller's buffer equal the fresh arrays, and reject a short buffer", () => {
    const text = new TextEncoder().encode("a prompt of some length, ".repeat(40));
    for (const e of engines()) {
      for (const n of [0, 15, 16, 17, 1000]) {
        const t = tokens(n, n + 3);
        const fresh = e.hashTokens(t);
        const out = new Uint32Array(fresh.length + 6).fill(7);
        const got = e.hashTokens(t, out);
        expect(Array.from(got), `${e.name} ${n}`).toEqual(Array.from(fresh));
        expect(got.buffer).toBe(out.buffer);
        expect(out[fresh.length]).toBe(7); // nothing written past the blocks
      }
      const freshText = e.hashText(text);
      expect(Array.from(e.hashText(text, new Uint32Array(freshText.length)))).toEqual(Array.from(freshText));
      expect(() => e.hashTokens(tokens(64, 1), new Uint32Array(7))).toThrow(/out must hold at least 8 u32 values/);
      expect(() => e.hashText(text, new Uint32Array(1))).toThrow(/out must hold at least/);
    }
  });

  it("ids written into inputTokens hash where they are as hashTokens hashes them", () => {
    const all = engines();
    const t = tokens(1000, 9);
    const expected = Array.from(all[2]!.hashTokens(t));
    for (const e of all) {
      e.inputTokens(t.length).set(t);
      expect(Array.from(e.hashInputTokens(t.length)), e.name).toEqual(expected);
      const out = new Uint32Array(expected.length);
      expect(e.hashInputTokens(t.length, out)).toBe(out);
      expect(Array.from(out)).toEqual(expected);
      expect(Array.from(e.hashInputTokens(t.length - 16))).toEqual(expected.slice(0, expected.length - 2));
      expect(() => e.inputTokens(1025)).toThrow(/does not fit the input buffer/);
      expect(() => e.hashInputTokens(1025)).toThrow(/does not fit the input buffer/);
      expect(() => e.inputTokens(-1)).toThrow();
      expect(() => e.inputTokens(1.5)).toThrow();
      expect(() => e.inputText(4097)).toThrow(/does not fit the input buffer/);
    }
  });

  it("a route input already in the input buffer routes as the same input copied in", () => {
    const t = tokens(800, 5);
    const text = new TextEncoder().encode("routing text, ".repeat(200));
    for (const e of engines()) {
      const rule = stageTable(ruleTable("dynamo-isl"));
      e.setTable(rule.kind, rule.k, rule.dims, rule.staged, rule.oslAt);
      e.setWorker(0, 2, 32);
      e.setWorker(1, 1, 32);
      e.indexStore(0, e.hashTokens(t.subarray(0, 320)));
      const copied = Array.from(e.route(routeInput(0, t, t.length)));
      e.inputTokens(t.length).set(t);
      expect(Array.from(e.route(routeInput(0, e.inputTokens(t.length), t.length))), e.name).toEqual(copied);
      const copiedText = Array.from(e.route(routeInput(Flag.text, text, text.length)));
      e.inputText(text.length).set(text);
      expect(Array.from(e.route(routeInput(Flag.text, e.inputText(text.length), text.length)))).toEqual(copiedText);
    }
  });

  for (const engine of ["wasm", "reference"] as const) {
    it(`the Router (${engine}) routes arrays of ids and text through the input buffer as it routes their copies`, () => {
      const workers = [
        { id: "p", role: "prefill" as const },
        { id: "d", role: "decode" as const },
      ];
      const r = routerOn(engine, ruleTable("dynamo-isl"), { workers, maxPromptTokens: 1024 });
      const ids = Array.from(tokens(900, 11), (x) => x % 50000);
      r.index.store("d", r.hash({ tokens: ids.slice(0, 480) }));
      expect(r.route({ tokens: ids })).toEqual(r.route({ tokens: Uint32Array.from(ids) }));
      const text = "héllo wörld — ".repeat(150); // multi-byte UTF-8
      r.index.store("d", r.hash({ text: text.slice(0, 700) }));
      expect(r.route({ text })).toEqual(r.route({ text: new TextEncoder().encode(text) }));
      expect(r.route({ text: "" })).toEqual(r.route({ text: new Uint8Array(0) }));
      // too long for the buffer: the engine's own error, as before
      expect(() => r.route({ tokens: new Array(1025).fill(1) })).toThrow(/does not fit the input buffer/);
      expect(() => r.route({ text: "x".repeat(4097) })).toThrow(/does not fit the input buffer/);
      expect(() => r.route({ tokens: [1, 2, -3] })).toThrow(/tokens\[2\] is not a token id/);
    });
  }
});
