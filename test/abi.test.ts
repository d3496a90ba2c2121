// The contract between the core and its hosts (spec/abi.json): hosts refuse a core of another ABI version, the
// request record is checked slot by slot on both engines alike, and no constant of the contract is typed by hand.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ABI_VERSION, DECISION_SLOTS, Kind, REQUEST_SLOTS } from "../src/contract/core-api.js";
import { createCore, instantiateCore } from "../src/core/core.js";
import { ErrorCode, coreErrorMessage } from "../src/contract/errors.js";
import { ruleTable } from "../src/table/rule-table.js";
import { coreModule, routerOn } from "./helpers.js";

const ROOT = join(import.meta.dirname, "..");
const spec = JSON.parse(readFileSync(join(ROOT, "spec/abi.json"), "utf8"));
const WORKERS = [
  { id: "p0", role: "prefill" as const },
  { id: "d0", role: "decode" as const },
];

describe("the ABI version", () => {
  it("is the spec's, in the core and in the host", () => {
    const x = instantiateCore(coreModule("release")).exports as { abiVersion(): number };
    expect(x.abiVersion()).toBe(spec.abi_version);
    expect(ABI_VERSION).toBe(spec.abi_version);
  });

  it("is checked when a host loads a core, naming both versions", () => {
    const real = instantiateCore(coreModule("release"));
    const older = {
      exports: { ...real.exports, abiVersion: () => ABI_VERSION - 1 },
    } as unknown as WebAssembly.Instance;
    expect(() => createCore(older)).toThrow(
      `implements ABI version ${ABI_VERSION - 1}, but this host expects ABI version ${ABI_VERSION}`,
    );
  });
});

describe("the exports", () => {
  it.each(["release", "debug"] as const)("of the %s build are exactly the spec's", (flavour) => {
    const names = WebAssembly.Module.exports(coreModule(flavour))
      .map((e) => e.name)
      .filter((n) => n !== "memory");
    expect(names.sort()).toEqual(spec.exports.map((e: { name: string }) => e.name).sort());
  });

  it("are checked when a host loads a module, naming the missing one", () => {
    const real = instantiateCore(coreModule("release"));
    const { route: _route, ...rest } = real.exports;
    expect(() => createCore({ exports: rest } as unknown as WebAssembly.Instance)).toThrow('does not export "route"');
  });
});

describe("the request record", () => {
  it("has the spec's slots", () => {
    expect(REQUEST_SLOTS).toBe(spec.request_record.length);
    expect(DECISION_SLOTS).toBe(spec.decision_record.length);
  });

  const bad: [string, Record<string, unknown>, number, RegExp][] = [
    ["a fractional turn", { turn: 2.5 }, ErrorCode.BAD_TURN, /turn must be an integer ≥ 0, got 2.5/],
    ["a NaN turn", { turn: NaN }, ErrorCode.BAD_TURN, /got NaN/],
    ["a fractional pinned worker", { pinnedDecode: 1.5 }, ErrorCode.BAD_PINNED, /pinned decode worker 1.5/],
  ];
  for (const engine of ["wasm", "reference"] as const) {
    it.each(bad)(`rejects %s (${engine})`, (_what, fields, code, message) => {
      const router = routerOn(engine, ruleTable("dynamo-isl"), { workers: WORKERS });
      const e = router.engine;
      const input = {
        flags: 0,
        data: new Uint32Array([1, 2, 3]),
        length: 3,
        promptTokens: 0,
        oslHat: 10,
        turn: 1,
        prevOutputTokens: 0,
        maxTokens: 0,
        pinnedDecode: -1,
        contextTokens: -1,
        ...fields,
      };
      expect(() => e.route(input)).toThrow(message);
      try {
        e.route(input);
      } catch (err) {
        expect((err as { code: number }).code).toBe(code);
      }
    });
    it(`rejects route flags outside 0–7 (${engine})`, () => {
      const e = routerOn(engine, ruleTable("dynamo-isl"), { workers: WORKERS }).engine;
      const input = {
        flags: 8,
        data: new Uint32Array([1]),
        length: 1,
        promptTokens: 0,
        oslHat: 10,
        turn: 1,
        prevOutputTokens: 0,
        maxTokens: 0,
        pinnedDecode: -1,
        contextTokens: -1,
      };
      expect(() => e.route(input)).toThrow("route flags must be an integer 0–7, got 8");
    });
  }
});

describe("one source for the contract", () => {
  it("gives every error code a message from the spec", () => {
    for (const e of spec.errors) {
      if (e.code === 0) continue;
      expect(coreErrorMessage(e.code, 7)).not.toMatch(/^core: error \d+ \(detail/);
    }
    expect(coreErrorMessage(ErrorCode.BAD_SIGNAL, 0)).toBe("core: prefillQueue must be a finite number ≥ 0");
    expect(coreErrorMessage(ErrorCode.BAD_SIGNAL, 1)).toBe("core: qps must be a finite number ≥ 0");
  });

  it("gives every kind its spec code", () => {
    expect(Kind).toEqual(Object.fromEntries(spec.kinds.map((k: { name: string; code: number }) => [k.name, k.code])));
  });

  it("keeps docs/table-format.md's rule-kind table in step with the kind descriptors", () => {
    const doc = readFileSync(join(ROOT, "docs/table-format.md"), "utf8");
    for (const kind of spec.kinds.filter((k: { learned: boolean }) => !k.learned)) {
      const row = doc.split("\n").find((line) => line.startsWith(`| \`${kind.name}\` |`));
      expect(row, `docs/table-format.md has no row for ${kind.name}`).toBeDefined();
      // PPD's parameters have a table of their own ("PPD parameters"): each is a row there with its default
      const ppd = row!.includes("see below");
      for (const p of kind.params as { name: string; type: string; default?: number | number[] }[]) {
        if (ppd) {
          const section = doc.slice(doc.indexOf("PPD parameters:"));
          const line = section.split("\n").find((l) => l.startsWith("| `") && l.includes(`\`${p.name}\``));
          expect(line, `PPD parameter ${p.name}`).toBeDefined();
          if (Array.isArray(p.default)) expect(line, p.name).toContain(`[${p.default.join(", ")}]`);
          else if (p.default !== undefined) expect(line, p.name).toMatch(new RegExp(`\\| ${p.default}(,|\\s*\\|)`));
          else expect(line, p.name).toContain("**required**");
          continue;
        }
        const documented = p.default === undefined ? `\`${p.name}\` (required` : `\`${p.name}\` (${p.default})`;
        expect(row, `${kind.name}.${p.name}`).toContain(documented);
      }
    }
  });

  it("fails the build on a kind's explain naming an unknown value or an unstaged parameter, a clause that may say nothing, a baseline order taken twice", async () => {
    const { checkSpec } = (await import(join(ROOT, "build/gen-abi.mjs"))) as { checkSpec(s: unknown): unknown };
    const changed = (change: (trtllm: { explain: Record<string, unknown>; baseline: { order: number } }) => void) => {
      const s = structuredClone(spec);
      change(s.kinds.find((k: { name: string }) => k.name === "trtllm"));
      return () => checkSpec(s);
    };
    expect(() => checkSpec(structuredClone(spec))).not.toThrow();
    expect(changed((k) => (k.explain.local = "isl − match ≤ {max_local_prefil_length}"))).toThrow(
      'kind trtllm: explain names unknown value "max_local_prefil_length"',
    );
    expect(changed((k) => (k.explain.remote = [{ when: "isl > max_local_prefill_length", say: "isl {isl}" }]))).toThrow(
      'a list whose last one has no "when"',
    );
    expect(changed((k) => (k.explain.remote = [{ when: "isl >> eff_D", say: "isl {isl}" }, "x"]))).toThrow(
      'explain "when" must be "a op b"',
    );
    expect(changed((k) => (k.baseline.order = 1))).toThrow("kind trtllm: baseline.order must be an integer ≥ 1");
    // the Go and Python hosts read a rule's parameters back from its staging slots: PPD's w_ttft has none
    const ppd = structuredClone(spec);
    ppd.kinds.find((k: { name: string }) => k.name === "ppd").explain.rule = "PPD weighs TTFT {w_ttft}";
    expect(() => checkSpec(ppd)).toThrow('kind ppd: explain names parameter "w_ttft", which has no staging slot');
  });

  it("types no contract constant by hand in assembly/ or src/", () => {
    // error codes, kinds, flags, roles, reasons and record slots as numeric literals, the way they were once copied
    const handTyped =
      /^\s*export const (E_[A-Z_]+|KIND_[A-Z_]+|FLAG_[A-Z_]+|ROLE_[A-Z_]+|REASON_[A-Z_]+|D_[A-Z_]+|R_[A-Z_]+|ABI_VERSION)\s*(:\s*\w+)?\s*=\s*\d/m;
    const files = (dir: string): string[] =>
      readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
        .filter((f) => f.endsWith(".ts") && !f.startsWith("generated"))
        .map((f) => join(dir, f));
    for (const file of [...files("assembly"), ...files("src")]) {
      expect(readFileSync(join(ROOT, file), "utf8"), file).not.toMatch(handTyped);
    }
  });
});
