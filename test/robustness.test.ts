// Bad input never traps the core and always gets a clear error; memory stays bounded.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createCore, instantiateCore } from "../src/core/core.js";
import { REQUEST_SLOTS } from "../src/contract/core-api.js";
import { CoreError } from "../src/contract/errors.js";
import { Router } from "../src/router/router.js";
import { encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule, kmeansTable, routerOn } from "./helpers.js";

const WORKERS = [
  { id: "p0", role: "prefill" as const },
  { id: "d0", role: "decode" as const },
  { id: "d1", role: "decode" as const },
];

describe("the raw core never traps", () => {
  it("survives every export called with arbitrary arguments, staged tables and request records (release build)", () => {
    const instance = instantiateCore(coreModule("release"));
    const x = instance.exports as Record<string, unknown>;
    const memory = x["memory"] as WebAssembly.Memory;
    expect((x["init"] as (a: number, b: number, c: number) => number)(64, 1 << 16, 4096)).toBe(0);
    const names = Object.keys(x).filter((n) => typeof x[n] === "function" && n !== "init");
    const num = fc.oneof(
      fc.integer({ min: -5, max: 300 }),
      fc.integer(),
      fc.constantFrom(-1, 0, 1, 2 ** 31 - 1, -(2 ** 31), 65536, 1e9),
      fc.double(),
      fc.constantFrom(NaN, Infinity, -Infinity, -0, 1e308),
    );
    const staging = (x["stagingPtr"] as () => number)() >>> 3;
    const request = (x["requestPtr"] as () => number)() >>> 3;
    fc.assert(
      fc.property(
        fc.array(fc.record({ fn: fc.constantFrom(...names), args: fc.array(num, { maxLength: 8 }) }), {
          maxLength: 40,
        }),
        fc.array(fc.oneof(fc.double(), fc.integer({ min: -2, max: 300 })), { maxLength: 64 }),
        fc.array(num, { minLength: REQUEST_SLOTS, maxLength: REQUEST_SLOTS }),
        (calls, staged, record) => {
          new Float64Array(memory.buffer).set(staged, staging);
          new Float64Array(memory.buffer).set(record, request);
          for (const c of calls) {
            const fn = x[c.fn] as (...a: unknown[]) => unknown;
            // i64 parameters take BigInt; only the getter rootHash has one (a return), so numbers suffice
            try {
              fn(...c.args);
            } catch (e) {
              if (e instanceof WebAssembly.RuntimeError)
                throw new Error(`${c.fn}(${c.args.join(", ")}) trapped: ${e.message}`);
              throw e;
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("keeps memory bounded across 10^6 route calls", () => {
    const router = routerOn(
      "wasm",
      ruleTable("dynamo-isl"),
      { workers: WORKERS, recordDecisions: true, capacityBlocks: 2000, indexBlocks: 8192 },
      "release",
    );
    const memory = (router.engine as unknown as { x: { memory: WebAssembly.Memory } }).x.memory;
    const before = memory.buffer.byteLength;
    const tokens = new Uint32Array(64);
    for (let i = 0; i < 1_000_000; i++) {
      tokens[0] = i; // every prompt new: the LRU keeps evicting
      tokens[17] = i & 1023;
      router.route({ tokens, oslHat: 100 });
    }
    expect(memory.buffer.byteLength).toBe(before);
    expect(router.index.count("d0") + router.index.count("d1")).toBeLessThanOrEqual(4000);
  });
});

describe("bad input gets a clear error and loses nothing", () => {
  const router = (): Router =>
    routerOn(
      "wasm",
      kmeansTable(
        [
          [0, 0, 0, 0],
          [1, 1, 1, 1],
        ],
        [0, 1],
      ),
      { workers: WORKERS, maxPromptTokens: 4096 },
    );

  const cases: [string, (r: Router) => unknown, RegExp][] = [
    ["NaN osl_hat", (r) => r.route({ tokens: [1, 2, 3], oslHat: NaN }), /oslHat must be a number ≥ 0, got NaN/],
    ["negative osl_hat", (r) => r.route({ tokens: [1, 2, 3], oslHat: -1 }), /oslHat must be a number ≥ 0, got -1/],
    ["huge osl_hat", (r) => r.route({ tokens: [1, 2, 3], oslHat: 1e300 }), /osl_hat/],
    [
      "NaN prompt length",
      (r) => r.route({ text: "abc", promptTokens: NaN, oslHat: 1 }),
      /length or token count out of range/,
    ],
    ["negative prompt length", (r) => r.route({ text: "abc", promptTokens: -5, oslHat: 1 }), /out of range: -5/],
    ["huge prompt length", (r) => r.route({ text: "abc", promptTokens: 1e12, oslHat: 1 }), /out of range/],
    ["oversized prompt", (r) => r.route({ tokens: new Uint32Array(5000), oslHat: 1 }), /does not fit the input buffer/],
    ["token id not an integer", (r) => r.route({ tokens: [1, 2.5], oslHat: 1 }), /tokens\[1\] is not a token id/],
    ["token id negative", (r) => r.route({ tokens: [-1], oslHat: 1 }), /tokens\[0\]/],
    ["no prompt", (r) => r.route({ oslHat: 1 }), /exactly one of tokens, text or blockHashes/],
    ["two prompts", (r) => r.route({ tokens: [1], text: "a", oslHat: 1 }), /exactly one of/],
    ["missing osl_hat for a table that uses it", (r) => r.route({ tokens: [1] }), /give oslHat or oslClass/],
    [
      "unknown osl class",
      (r) => r.route({ tokens: [1], oslClass: "huge" }),
      /oslClass given but the table has no osl_classes/,
    ],
    ["negative turn", (r) => r.route({ tokens: [1], oslHat: 1, turn: -1 }), /turn must be an integer ≥ 0, got -1/],
    ["fractional turn", (r) => r.route({ tokens: [1], oslHat: 1, turn: 1.5 }), /turn must be an integer ≥ 0, got 1.5/],
    ["unknown pinned worker", (r) => r.route({ tokens: [1], oslHat: 1, decodeWorker: "zz" }), /unknown worker "zz"/],
    [
      "pinned worker that is not a decode worker",
      (r) => r.route({ tokens: [1], oslHat: 1, decodeWorker: "p0" }),
      /not a registered decode worker/,
    ],
    ["store for an unknown worker", (r) => r.index.store("nope", ["0000000000000001"]), /unknown worker "nope"/],
    ["malformed hash", (r) => r.index.store("d0", ["xyz"]), /\[0\]: expected 16 hex digits/],
    ["hash out of 64 bits", (r) => r.index.store("d0", [1n << 64n]), /does not fit in 64 bits/],
    ["NaN load", (r) => r.setLoad("d0", { activePrefillTokens: NaN }), /load must be a finite number/],
    ["negative load", (r) => r.setLoad("d0", { activeDecodeTokens: -3 }), /load must be a finite number ≥ 0, got -3/],
    ["NaN qps", (r) => r.setSignals({ qps: NaN }), /qps must be a finite number/],
    ["duplicate worker", (r) => r.addWorker({ id: "d0", role: "decode" }), /already exists/],
    ["bad role", (r) => r.addWorker({ id: "x", role: "replica" as never }), /role must be prefill, decode or both/],
    ["truncated table", (r) => r.setTable(encodeTable(ruleTable("trtllm")).subarray(0, 20)), /^table: /],
    [
      "corrupted table",
      (r) => {
        const b = encodeTable(ruleTable("trtllm"));
        b[b.length - 3]! ^= 0x20;
        return r.setTable(b);
      },
      /^table: /,
    ],
    ["wrong version", (r) => r.setTable({ ...ruleTable("trtllm"), version: 4 as 1 }), /version/], // 1 to 3 are read
    ["K = 0", (r) => r.setTable(kmeansTable([], [])), /table: centroids/],
    [
      "mismatched dimensions",
      (r) =>
        r.setTable(
          kmeansTable(
            [
              [0, 0, 0, 0],
              [1, 1, 1],
            ],
            [0, 1],
          ),
        ),
      /table: centroids\[1\]/,
    ],
  ];
  for (const [name, f, message] of cases) {
    it(`rejects ${name}`, () => {
      const r = router();
      expect(() => f(r)).toThrow(message);
      // and the router still routes with its table and index as before
      expect(r.route({ tokens: [1, 2, 3], oslHat: 10 }).decodeWorker).toBe("d0");
      expect(r.table.kind).toBe("kmeans");
    });
  }

  it("rejects a table the core refuses without replacing the active one (K above 256 via the engine)", () => {
    const r = router();
    const staged = new Float64Array(4096);
    expect(() => r.engine.setTable(1, 300, 4, staged, -1)).toThrow(CoreError);
    expect(() => r.engine.setTable(1, 300, 4, staged, -1)).toThrow(/K must be 1–256, got 300/);
    expect(() => r.engine.setTable(1, 2, 5, staged, -1)).toThrow(/feature count must be 1–4, got 5/);
    expect(() => r.engine.setTable(42, 2, 4, staged, -1)).toThrow(/unknown table kind 42/);
    expect(r.route({ tokens: [1, 2, 3], oslHat: 10 }).reason).toBe("cluster");
  });

  it("rejects worker capacities beyond the index pool, naming what is left", () => {
    expect(() =>
      routerOn("wasm", ruleTable("always-local"), { workers: WORKERS, capacityBlocks: 100, indexBlocks: 250 }),
    ).toThrow(/exceed the index pool \(50 blocks left/);
  });

  it("rejects a second init and out-of-range configs", () => {
    expect(() => createCore(instantiateCore(coreModule("release")), { maxWorkers: 0 })).toThrow(/maxWorkers/);
    expect(() => createCore(instantiateCore(coreModule("release")), { maxInputBytes: 1 << 30 })).toThrow(
      /maxInputBytes/,
    );
    const x = instantiateCore(coreModule("release")).exports as Record<string, (...a: number[]) => number>;
    expect(x["init"]!(4, 1024, 16)).toBe(0);
    expect(x["init"]!(4, 1024, 16)).toBe(2);
  });
});

describe("the incremental-runtime build (for the Envoy filter)", () => {
  it("routes exactly like the stub-runtime build", () => {
    const table = kmeansTable(
      [
        [0, 0, 0, 0],
        [1, -1, 0.5, 0],
        [-1, 1, 0, 2],
      ],
      [0, 1, 1],
    );
    const options = { workers: WORKERS, recordDecisions: true };
    const a = routerOn("wasm", table, options, "incremental");
    const b = routerOn("wasm", table, options, "release");
    for (let i = 0; i < 300; i++) {
      const tokens = Array.from({ length: (i * 37) % 700 }, (_, j) => (j < 200 ? j : i * 1000 + j));
      expect(a.route({ tokens, oslHat: (i * 13) % 900 })).toEqual(b.route({ tokens, oslHat: (i * 13) % 900 }));
    }
  });
});
