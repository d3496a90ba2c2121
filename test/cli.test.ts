// The dolphin command as a user runs it: a real process, stdin in, stdout out, exit codes.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { caseTokens } from "./vectors-expand.js";

const BIN = new URL("../bin/dolphin.js", import.meta.url).pathname;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Repository-relative paths of the TypeScript files reached from `entries` by static imports (not import()). */
function staticImports(entries: string[]): string[] {
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file) || !existsSync(file)) return;
    seen.add(file);
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s+"(\.{1,2}\/[^"]+)"/gm)) {
      if (/^(?:import|export)\s+type\s/.test(m[0])) continue; // type-only: erased at build
      visit(join(dirname(file), m[1]!.replace(/\.js$/, ".ts")));
    }
  };
  entries.forEach(visit);
  return [...seen].map((f) => relative(ROOT, f));
}

function dolphin(args: string[], input = ""): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { input, encoding: "utf8", timeout: 60_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

interface HashCase {
  name: string;
  mode: string;
  block_size?: number;
  model: string;
  salt: string;
  text?: string;
  hashes?: string[];
}

describe("dolphin hash", () => {
  const vectors = JSON.parse(readFileSync(new URL("../spec/vectors/hashes.json", import.meta.url), "utf8")) as {
    cases: HashCase[];
  };
  const small = vectors.cases.filter((c) => c.hashes && c.hashes.length > 0 && c.hashes.length < 300);
  it.each(
    small
      .filter((c) => c.mode === "tokens")
      .slice(0, 4)
      .map((c) => [c.name, c] as const),
  )("prints the known hashes for %s", (_, c) => {
    const tokens = caseTokens(c as never);
    const args = ["hash", "--block-size", String(c.block_size ?? 16)];
    if (c.model) args.push("--model", c.model);
    if (c.salt) args.push("--salt", c.salt);
    const r = dolphin(args, JSON.stringify(Array.from(tokens)));
    expect(r.err).toBe("");
    expect(r.out.trim().split("\n")).toEqual(c.hashes);
  });

  it("hashes raw text with --text", () => {
    const c = small.find((x) => x.mode === "text" && x.text !== undefined && !x.model && !x.salt);
    expect(c).toBeDefined();
    const r = dolphin(["hash", "--text"], c!.text!);
    expect(r.out.trim().split("\n")).toEqual(c!.hashes);
  });

  it("hashes with llm-d's scheme under --scheme llm-d-cbor-fnv, and refuses an unknown scheme", () => {
    const fnv = JSON.parse(readFileSync(new URL("../spec/vectors/hashes-cbor-fnv.json", import.meta.url), "utf8")) as {
      cases: {
        name: string;
        tokens?: number[];
        model: string;
        hash_seed: string;
        block_size: number;
        hashes?: string[];
      }[];
    };
    const c = fnv.cases.find((x) => x.name === "hash seed (PYTHONHASHSEED)")!;
    const args = ["hash", "--scheme", "llm-d-cbor-fnv", "--hash-seed", c.hash_seed, "--model", c.model];
    expect(dolphin(args, JSON.stringify(c.tokens)).out.trim().split("\n")).toEqual(c.hashes);
    expect(dolphin(["hash", "--scheme", "fnv"], "[]").err).toMatch(/--scheme: expected xxh64-chain or llm-d-cbor-fnv/);
  });

  it("rejects input that is not a JSON array of token ids, saying where", () => {
    const r = dolphin(["hash"], "[1, 2, -3]");
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/token \[2\] is not an integer/);
    expect(dolphin(["hash", "--block-size", "0"], "[]").err).toMatch(/--block-size must be an integer in 1–4096/);
  });
});

describe("dolphin route", () => {
  it("prints one JSON decision per request line and reports bad lines by number", () => {
    const input = [
      JSON.stringify({ tokens: Array.from({ length: 3000 }, (_, i) => i), osl_hat: 200 }),
      "not json",
      JSON.stringify({ tokens: Array.from({ length: 3000 }, (_, i) => i), osl_hat: 200 }),
      JSON.stringify({ text: "hello", osl_hat: -4 }),
    ].join("\n");
    const r = dolphin(
      [
        "route",
        "--table",
        "spec/vectors/tables/dynamo-isl.msgpack",
        "--workers",
        "p=prefill,d1=decode,d2=decode",
        "--record",
      ],
      input,
    );
    expect(r.code).toBe(1);
    const lines = r.out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatchObject({
      line: 1,
      path: "remote",
      decodeWorker: "d1",
      features: { isl: 3000, effD: 3000 },
    });
    expect(lines[1]).toMatchObject({ line: 2 });
    expect(lines[1].error).toMatch(/JSON/);
    // --record: the second identical prompt finds its prefix on d1 and goes local
    expect(lines[2]).toMatchObject({ line: 3, path: "local", decodeWorker: "d1", matchedBlocks: { decode: 187 } });
    expect(lines[3].error).toMatch(/oslHat must be a number ≥ 0, got -4/);
    expect(r.err).toMatch(/2 line\(s\) rejected/);
  });

  it("rejects a corrupted table naming the field", () => {
    const r = dolphin(["route", "--table", "spec/vectors/tables/invalid-checksum-mismatch.msgpack"], "");
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/table: checksum/);
  });
});

describe("dolphin", () => {
  it.each(["hash", "route", "bench", "table", "start"])("%s --help explains itself", (cmd) => {
    const r = dolphin([cmd, "--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`dolphin ${cmd}`));
  });

  it("--version prints the package version; exit codes are 2 for usage and 1 for failures", () => {
    const r = dolphin(["--version"]);
    expect(r.code).toBe(0);
    expect(r.out.trim()).toMatch(/^dolphin-routing \d+\.\d+\.\d+/);
    expect(dolphin([]).code).toBe(2);
    expect(dolphin(["hash", "--block-size", "0"], "[]").code).toBe(2);
    expect(dolphin(["route", "--table", "spec/vectors/tables/invalid-checksum-mismatch.msgpack"], "").code).toBe(1);
  });

  it("serve --vllm and envoy --vllm say to run npm run setup when vLLM is not installed, and start nothing", () => {
    const empty = mkdtempSync(join(tmpdir(), "dolphin-no-vllm-"));
    try {
      for (const cmd of ["serve", "envoy"]) {
        const r = spawnSync(process.execPath, [BIN, cmd, "--vllm", "1P1D", "--port", "0"], {
          encoding: "utf8",
          timeout: 60_000,
          env: { ...process.env, DOLPHIN_CACHE: empty },
        });
        expect(r.status).toBe(1);
        expect(r.stderr).toMatch(/vLLM is not installed .*run npm run setup/);
      }
      expect(dolphin(["serve", "--vllm", "1X1D"]).err).toMatch(/--vllm/);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it("simulate warns when the cluster is overloaded at the requested rate, and only then", () => {
    const args = ["simulate", "--workload", "hybrid", "--split", "1P1D", "--policy", "dynamo-isl", "--requests", "100"];
    const over = dolphin([...args, "--load", "x4"]);
    expect(over.code).toBe(0);
    expect(over.err).toMatch(/warning: the cluster is overloaded at [\d.]+ req\/s: the median request waits/);
    const light = dolphin([...args, "--load", "x0.02"]);
    expect(light.code).toBe(0);
    expect(light.err).not.toMatch(/overloaded/);
  });

  it("names the table file in its errors: a missing file, a corrupt one", () => {
    const missing = dolphin(["table", "no/such/table.msgpack"]);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/cannot read table file no\/such\/table\.msgpack: no such file/);
    expect(missing.err).not.toMatch(/ENOENT/);
    const corrupt = dolphin(["table", "spec/vectors/tables/invalid-checksum-mismatch.msgpack"]);
    expect(corrupt.err).toMatch(/invalid-checksum-mismatch\.msgpack: table: checksum: mismatch/);
  });

  it("lists its commands and refuses unknown ones", () => {
    expect(dolphin(["--help"]).out).toMatch(/bench .*\n/);
    const r = dolphin(["fly"]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/unknown command "fly"/);
  });

  it("bench core --json prints the documented shape with a ratio per timing", () => {
    const r = dolphin(["bench", "core", "--json", "--time", "50"]);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out);
    for (const t of [
      j.hash_20k_tokens_us,
      j.match_1250_blocks_16_workers_us,
      j.decide_ns.k8,
      j.decide_ns.k64,
      j.route_20k_tokens_us,
    ]) {
      expect(t.wasm).toBeGreaterThan(0);
      expect(t.ts).toBeGreaterThan(0);
      expect(t.speedup).toBeCloseTo(t.ts / t.wasm, 1);
    }
    expect(j.wasm_bytes).toBe(readFileSync(new URL("../build/core.wasm", import.meta.url)).length);
    expect(Object.keys(j.route_us_by_workers).sort()).toEqual(["1024", "16", "256"]);
    for (const us of Object.values(j.route_us_by_workers)) expect(us).toBeGreaterThan(0);
    expect(Object.keys(j.match_us_by_workers).sort()).toEqual(["1024", "16", "256"]);
    for (const us of Object.values(j.match_us_by_workers)) expect(us).toBeGreaterThan(0);
    // the median of per-round ratios: a ratio of two timings, so positive and finite
    expect(j.route_1024_over_16_workers).toBeGreaterThan(0);
    expect(Number.isFinite(j.route_1024_over_16_workers)).toBe(true);
    expect(j.index_bytes_per_block).toBeGreaterThan(0);
    // present only when cc and xxhash.h exist, and then a real figure (the bench checks it hashed the same prompt)
    if ("native_hash_20k_tokens_us" in j) expect(j.native_hash_20k_tokens_us).toBeGreaterThan(0);
    // hashing: in core memory (like the native program) and the whole hashTokens() call; ratios with the native
    expect(j.hash_20k_tokens_us.wasm_with_copy).toBeGreaterThan(0);
    expect("hash_vs_native" in j).toBe("native_hash_20k_tokens_us" in j);
    if ("hash_vs_native" in j)
      expect(j.hash_vs_native.wasm).toBeCloseTo(j.hash_20k_tokens_us.wasm / j.native_hash_20k_tokens_us, 1);
  }, 120_000);

  it("every command's --help answers, the --help list names all of them, and each has its own module", () => {
    const list = dolphin(["--help"]).out;
    const names = [...list.matchAll(/^  (\w+) /gm)].map((m) => m[1]!);
    expect(names).toEqual([
      "hash",
      "route",
      "bench",
      "simulate",
      "table",
      "start",
      "train",
      "eval",
      "ablate",
      "serve",
      "calibrate",
      "tune",
      "envoy",
      "gateway",
      "worker",
      "report",
      "explore",
    ]);
    for (const name of names) {
      expect(existsSync(join(ROOT, "src", "cli", `${name}.ts`))).toBe(true);
      const r = dolphin([name, "--help"]);
      expect(r.code).toBe(0);
      expect(r.out).toMatch(new RegExp(`^dolphin ${name}`));
    }
  }, 120_000);

  // Start-up time: hash and route must not pull in the simulator, the learner, the proxy or the benchmarks. The
  // dispatcher imports commands with import(); this walks the static imports from it and from those two commands.
  it.each(["hash", "route", "table"])(
    "%s statically imports nothing from src/sim, src/learn, src/serve, src/report or bench/",
    (name) => {
      const reached = staticImports([join(ROOT, "src", "cli", "index.ts"), join(ROOT, "src", "cli", `${name}.ts`)]);
      const heavy = reached.filter((f) => /^(src\/(sim|learn|serve)\/|src\/report\/|bench\/)/.test(f));
      expect(heavy).toEqual([]);
      expect(reached).toContain(`src/cli/${name}.ts`);
    },
  );

  it("bench mix-shift refuses a bad threshold, window or family before it simulates anything", () => {
    for (const [args, message] of [
      [["--psi", "x"], /--psi must be a number > 0, got x/],
      [["--windows", "1"], /--windows must be an integer in 2–100000, got 1/],
      [["--families", "nope"], /nope/],
    ] as const) {
      const r = dolphin(["bench", "mix-shift", ...args]);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(r.err).toMatch(message);
    }
  });

  it("bench sim names --trace only when --trace was given, and by default runs the trace shipped in data/", () => {
    expect(dolphin(["bench", "sim", "--trace", "no-such.jsonl"]).err).toMatch(/--trace: no such file: no-such\.jsonl/);
    expect(existsSync(join(ROOT, "data", "traces", "mooncake_conversation_dev.jsonl"))).toBe(true);
    expect(readFileSync(join(ROOT, "src", "cli", "bench.ts"), "utf8")).toMatch(
      /packageFile\("data", "traces", "mooncake_conversation_dev\.jsonl"\)/,
    );
  });

  it("table describes a table file", () => {
    const r = dolphin(["table", "spec/vectors/tables/kmeans.msgpack"]);
    expect(r.out).toMatch(/kmeans table: K = 8/);
  });
});
