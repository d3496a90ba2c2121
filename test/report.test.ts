// `dolphin report` (src/report/: report.ts and the files it draws on, report-files.ts) and its input (src/report/eval-output.ts): validation with field paths, the markdown table, deltas vs Dynamo, the SVG
// charts (well-formed XML, one bar or line per policy, the paper's marker, escaping) and the files written.

import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { attainmentVsLoadChart } from "../src/report/attainment-chart.js";
import { ReportError, validateEvalOutput, type EvalOutput, type PolicyOutcome } from "../src/report/eval-output.js";
import { markdownTable } from "../src/report/markdown.js";
import { deltasVsBaseline } from "../src/report/numbers.js";
import { p90Chart } from "../src/report/p90-chart.js";
import { PAPER_DELTAS, paperKind } from "../src/report/paper.js";
import { parseReportInput } from "../src/report/report.js";
import { niceTicks } from "../src/report/svg.js";
import { writeReport } from "../src/report/report-files.js";

const POLICIES = [
  "dolphin",
  "dynamo-isl",
  "dynamo-load",
  "dynamo-legacy",
  "llm-d",
  "trtllm",
  "ppd",
  "always-local",
  "always-remote",
];

function policy(attainment: number, ttftP90: number, tpotP90: number): PolicyOutcome {
  return {
    slo_attainment: attainment,
    ttft_ms: { p50: ttftP90 / 2, p90: ttftP90, p99: ttftP90 * 1.5 },
    tpot_ms: { p50: tpotP90 / 2, p90: tpotP90, p99: tpotP90 * 1.5 },
    throughput_tokens_per_s: 400,
    local_fraction: 0.4,
    failed: 0,
  };
}

/** A hand-made hybrid result: dolphin 8% faster TTFT and 5% faster TPOT than dynamo-isl, 3 points better attainment. */
function result(over: Partial<EvalOutput> = {}, policies: string[] = POLICIES): EvalOutput {
  const ps: Record<string, PolicyOutcome> = {};
  policies.forEach((n, i) => {
    ps[n] = policy(0.8 - 0.05 * i, 4000 + 300 * i, 80 + 4 * i);
  });
  ps["dolphin"] = policy(0.83, 4000 * 0.92, 80 * 0.95);
  ps["dynamo-isl"] = policy(0.8, 4000, 80);
  return {
    workload: "hybrid",
    cluster: "h20-72b",
    split: "3P1D",
    slo: { ttft_ms: 10000, tpot_ms: 100 },
    load: { spec: "saturated", scale: 0.6, rps: 1.8 },
    requests: 1500,
    simulated: true,
    policies: ps,
    ...over,
  };
}

/** The error message `f` throws (fails when it throws nothing). */
function errorOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    return e instanceof Error ? e.message : String(e);
  }
  throw new Error("expected an error");
}

/**
 * A small XML well-formedness check (no dependency): one declaration at most, one root <svg> with the SVG
 * namespace, every tag balanced, attributes quoted and unique, no stray "<" and only known entities in text.
 * Returns the problems found (empty = well-formed).
 */
function xmlProblems(s: string): string[] {
  const problems: string[] = [];
  const body = s.replace(/^<\?xml[^?]*\?>\s*/, "").replace(/<!--[\s\S]*?-->/g, "");
  const stack: string[] = [];
  let roots = 0,
    pos = 0;
  const tag = /<(\/?)([A-Za-z_][\w:.-]*)((?:\s+[A-Za-z_][\w:.-]*\s*=\s*(?:"[^"<]*"|'[^'<]*'))*)\s*(\/?)>/y;
  const checkText = (t: string): void => {
    if (t.includes(">")) problems.push(`raw ">" in text: ${t.slice(0, 40)}`);
    for (const m of t.matchAll(/&([^;\s]*);?/g)) {
      if (!/^&(amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);$/.test(m[0])) problems.push(`bad entity ${m[0]}`);
    }
  };
  while (pos < body.length) {
    const lt = body.indexOf("<", pos);
    if (lt < 0) {
      checkText(body.slice(pos));
      break;
    }
    checkText(body.slice(pos, lt));
    tag.lastIndex = lt;
    const m = tag.exec(body);
    if (!m) {
      problems.push(`malformed tag at ${lt}: ${body.slice(lt, lt + 50)}`);
      break;
    }
    const [all, close, name, attrs, selfClose] = m;
    const attrNames = [...(attrs ?? "").matchAll(/([A-Za-z_][\w:.-]*)\s*=/g)].map((a) => a[1]);
    if (new Set(attrNames).size !== attrNames.length) problems.push(`repeated attribute in <${name}>`);
    for (const a of (attrs ?? "").matchAll(/=\s*(?:"([^"]*)"|'([^']*)')/g))
      checkText((a[1] ?? a[2] ?? "").replace(/>/g, "&gt;"));
    if (close) {
      if (stack.pop() !== name) problems.push(`</${name}> closes the wrong element`);
    } else {
      if (stack.length === 0) {
        roots++;
        if (name !== "svg" || !/xmlns="http:\/\/www\.w3\.org\/2000\/svg"/.test(attrs ?? ""))
          problems.push("root is not <svg xmlns=…>");
      }
      if (!selfClose) stack.push(name!);
    }
    pos = lt + all.length;
  }
  if (stack.length) problems.push(`unclosed: ${stack.join(", ")}`);
  if (roots !== 1) problems.push(`expected one root element, found ${roots}`);
  return problems;
}

describe("xmlProblems (the test's own checker)", () => {
  it("accepts well-formed SVG and rejects broken nesting, stray < and bare &", () => {
    const ok = `<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><g><text x="1">a &amp; b</text></g><rect/></svg>`;
    expect(xmlProblems(ok)).toEqual([]);
    expect(xmlProblems(ok.replace("</g>", ""))).not.toEqual([]);
    expect(xmlProblems(ok.replace("a &amp; b", "a & b"))).not.toEqual([]);
    expect(xmlProblems(ok.replace("a &amp; b", "a < b"))).not.toEqual([]);
    expect(xmlProblems(ok.replace('x="1"', 'x="1" x="2"'))).not.toEqual([]);
  });
});

describe("validateEvalOutput", () => {
  it("accepts an eval result and keeps extra fields", () => {
    const r = validateEvalOutput({ ...result(), extra: 7 }, "eval.json");
    expect(r.policies["dolphin"]!.ttft_ms.p90).toBeCloseTo(3680);
    expect(r["extra"]).toBe(7);
  });

  it("names the source and the field of a bad policy percentile", () => {
    const bad = JSON.parse(JSON.stringify(result())) as Record<string, any>;
    bad["policies"]["dolphin"]["ttft_ms"]["p90"] = "fast";
    expect(errorOf(() => validateEvalOutput(bad, "eval.json"))).toBe(
      "eval.json: policies.dolphin.ttft_ms.p90: expected a number",
    );
  });

  it.each([
    [
      "workload",
      (o: Record<string, any>) => {
        delete o["workload"];
      },
    ],
    [
      "slo.tpot_ms",
      (o: Record<string, any>) => {
        o["slo"]["tpot_ms"] = "100";
      },
    ],
    [
      "simulated",
      (o: Record<string, any>) => {
        o["simulated"] = false;
      },
    ],
    [
      "policies",
      (o: Record<string, any>) => {
        o["policies"] = {};
      },
    ],
    [
      "policies.dynamo-isl.slo_attainment",
      (o: Record<string, any>) => {
        o["policies"]["dynamo-isl"]["slo_attainment"] = 1.5;
      },
    ],
    [
      "policies.ppd.failed",
      (o: Record<string, any>) => {
        delete o["policies"]["ppd"]["failed"];
      },
    ],
    [
      "policies.llm-d.tpot_ms",
      (o: Record<string, any>) => {
        o["policies"]["llm-d"]["tpot_ms"] = [1, 2, 3];
      },
    ],
  ])("rejects a bad %s, naming it", (fieldPath, mutate) => {
    const bad = JSON.parse(JSON.stringify(result())) as Record<string, any>;
    mutate(bad);
    const message = errorOf(() => validateEvalOutput(bad, "r.json"));
    expect(message.startsWith(`r.json: ${fieldPath}: expected`)).toBe(true);
  });

  it("rejects a non-object with a ReportError", () => {
    expect(() => validateEvalOutput([1], "x")).toThrow(ReportError);
  });

  it("reads a null percentile (JSON's NaN: nothing completed) as NaN, rendered n/a", () => {
    const raw = JSON.parse(JSON.stringify(result())) as Record<string, any>;
    raw["policies"]["always-remote"]["ttft_ms"]["p99"] = null;
    const r = validateEvalOutput(raw, "x");
    expect(r.policies["always-remote"]!.ttft_ms.p99).toBeNaN();
    expect(markdownTable([r])).toContain("n/a");
  });
});

describe("parseReportInput", () => {
  it("reads one object as a result, an array as a sweep, JSON lines as results", () => {
    const r = result();
    expect(parseReportInput(JSON.stringify(r), "a").results).toHaveLength(1);
    const sweep = parseReportInput(JSON.stringify([r, result({ load: { spec: "x2", scale: 2, rps: 6 } })]), "b");
    expect(sweep.sweeps[0]).toHaveLength(2);
    expect(parseReportInput(`${JSON.stringify(r)}\n${JSON.stringify(r)}\n`, "c").results).toHaveLength(2);
  });

  it("rejects a sweep that mixes splits, naming the element", () => {
    const text = JSON.stringify([result(), result({ split: "2P2D" })]);
    expect(errorOf(() => parseReportInput(text, "s.json"))).toMatch(/^s\.json\[1\]: split: expected "3P1D"/);
  });
});

describe("paper figures", () => {
  it("quotes the seeds' ranges (hybrid −7.5…−7.9% / −6.5…−10.1%, trace −5.7…−6.5% / −2.6…−5.5%, single level)", () => {
    expect(PAPER_DELTAS.hybrid.ttftP90).toEqual([-0.079, -0.075]);
    expect(PAPER_DELTAS.hybrid.tpotP90).toEqual([-0.101, -0.065]);
    expect(PAPER_DELTAS.trace.ttftP90).toEqual([-0.065, -0.057]);
    expect(PAPER_DELTAS.trace.tpotP90).toEqual([-0.055, -0.026]);
    expect(PAPER_DELTAS.single.ttftP90).toEqual([0, 0]);
    for (const d of Object.values(PAPER_DELTAS)) expect(d.source).toMatch(/seed 000/);
  });

  it("maps workloads to the paper's kinds", () => {
    expect(paperKind(result())).toBe("hybrid");
    expect(paperKind(result({ workload: "arxiv" }))).toBe("single");
    expect(paperKind(result({ workload: "humaneval" }))).toBe("single");
    expect(paperKind(result({ workload: "mooncake_trace" }))).toBe("trace");
    expect(paperKind(result({ workload: "multiturn" }))).toBeNull();
    expect(paperKind(result({ workload: "multiturn", paper_kind: "trace" }))).toBe("trace");
  });
});

describe("deltasVsBaseline", () => {
  it("computes x / base − 1 for P90 TTFT and TPOT and the attainment difference in points", () => {
    const d = deltasVsBaseline(result());
    expect(d.ttftP90).toBeCloseTo(-0.08, 12);
    expect(d.tpotP90).toBeCloseTo(-0.05, 12);
    expect(d.attainment).toBeCloseTo(3, 12);
  });

  it("compares any two policies", () => {
    const r = result();
    const d = deltasVsBaseline(r, "dynamo-isl", "dolphin");
    expect(d.ttftP90).toBeCloseTo(1 / 0.92 - 1, 12);
    expect(d.attainment).toBeCloseTo(-3, 12);
  });

  it("names a missing policy", () => {
    expect(errorOf(() => deltasVsBaseline(result({}, ["dolphin", "ppd"]), "dolphin", "trtllm"))).toMatch(
      /no "trtllm" policy/,
    );
  });
});

describe("markdownTable", () => {
  const r = result();
  const text = markdownTable([r, result({ workload: "arxiv", split: "2P2D" })]);

  it("has one section per result, each saying simulated with workload, cluster, split, SLO and load", () => {
    expect(text.match(/^## /gm)).toHaveLength(2);
    expect(text).toContain("## hybrid · h20-72b · 3P1D (simulated)");
    expect(text).toContain(
      "simulated cluster — workload hybrid, cluster h20-72b, split 3P1D, SLO TTFT 10000 ms / TPOT 100 ms, load saturated (×0.60, 1.80 req/s), 1500 requests",
    );
  });

  it("has a row for every policy, sorted by attainment, best first", () => {
    const section = text.split("\n## ")[0]!;
    const rows = section.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| policy"));
    const names = rows.map((l) => l.split("|")[1]!.trim().replace(/\*\*/g, ""));
    expect(new Set(names)).toEqual(new Set(POLICIES));
    expect(names[0]).toBe("dolphin");
    const attainments = rows.map((l) => Number(l.split("|")[2]));
    expect([...attainments].sort((a, b) => b - a)).toEqual(attainments);
    expect(rows[0]).toContain("| 83.0 | 1840 | 3680 | 5520 | 38.0 | 76.0 | 114 | 400 | 40.0 | 0 |");
  });

  it("ends each section with dolphin vs dynamo-isl and the paper's figure for the workload kind", () => {
    expect(text).toContain(
      "dolphin vs dynamo-isl: P90 TTFT −8.0%, P90 TPOT −5.0%, SLO attainment +3.0 points (paper, real cluster, hybrid workload, two P/D splits: P90 TTFT −7.5…−7.9%, P90 TPOT −6.5…−10.1%)",
    );
    expect(text).toContain("level with Dynamo or slightly behind");
  });

  it("says so when dynamo-isl is missing", () => {
    expect(
      markdownTable(
        [result({}, ["dolphin", "ppd"])].map((x) => {
          delete x.policies["dynamo-isl"];
          return x;
        }),
      ),
    ).toContain("dolphin vs dynamo-isl: not available (the result lacks dynamo-isl)");
  });

  it("escapes pipes and angle brackets in names", () => {
    const odd = result();
    odd.policies["a|b<c>"] = policy(0.1, 1, 1);
    const t = markdownTable([odd]);
    expect(t).toContain("a\\|b&lt;c&gt;");
    expect(t).not.toContain("<c>");
  });
});

describe("p90Chart", () => {
  const svg = p90Chart(result());

  it("is well-formed standalone SVG with a title saying simulated and axis labels with units", () => {
    expect(xmlProblems(svg)).toEqual([]);
    expect(svg).toMatch(/^<\?xml[^>]*\?>\n<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" width="720"/);
    expect(svg).toContain("P90 TTFT and TPOT per policy — hybrid, h20-72b, 3P1D (simulated)");
    expect(svg).toContain("P90 TTFT (s)");
    expect(svg).toContain("P90 TPOT (ms)");
    expect(svg).not.toMatch(/<script|@import|url\(|href=/);
  });

  it("has one bar per policy in each of the two panels, dolphin highlighted", () => {
    const bars = [...svg.matchAll(/<rect class="bar" data-policy="([^"]+)"[^>]*fill="([^"]+)"/g)];
    expect(bars).toHaveLength(2 * POLICIES.length);
    for (const p of POLICIES) expect(bars.filter((b) => b[1] === p)).toHaveLength(2);
    const colors = new Set(bars.filter((b) => b[1] === "dolphin").map((b) => b[2]));
    expect(colors.size).toBe(1);
    expect(bars.filter((b) => b[1] === "ppd")[0]![2]).not.toBe([...colors][0]);
  });

  it("draws the paper's band at dynamo-isl × (1 + delta) on both panels", () => {
    const targets = svg.match(/<g class="paper-target"[\s\S]*?<\/g>/g) ?? [];
    expect(targets).toHaveLength(2);
    // TTFT axis: 4000 ms dynamo-isl; band 3684…3700 ms = 3.68…3.70 s
    expect(targets[0]).toContain("paper: P90 TTFT dynamo-isl × (1 − 7.5…7.9%) = 3.68 s…3.70 s");
    expect(svg).toContain(
      "paper (real cluster, hybrid workload, two P/D splits), dolphin vs dynamo-isl: P90 TTFT −7.5…−7.9%, P90 TPOT −6.5…−10.1%",
    );
  });

  it("marks the band's position on the bar's scale", () => {
    // dolphin's bar ends at 3680 ms, just left of the band's left edge at 4000 × 0.921 = 3684 ms
    const dolphinBar = /<rect class="bar" data-policy="dolphin" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"/.exec(svg)!;
    const band =
      /<g class="paper-target" data-metric="ttft_ms">[\s\S]*?<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"/.exec(svg)!;
    const barEnd = Number(dolphinBar[1]) + Number(dolphinBar[2]);
    const bandStart = Number(band[1]) + 1,
      bandEnd = bandStart + Number(band[2]) - 2;
    expect(bandStart).toBeGreaterThanOrEqual(barEnd - 0.2);
    expect(bandEnd - bandStart).toBeGreaterThan(0);
  });

  it("has no paper band for a workload the paper has no figure for, and says so", () => {
    const s = p90Chart(result({ workload: "multiturn" }));
    expect(s).not.toContain('class="paper-target"');
    expect(s).toContain("paper: no published figure for this workload");
    expect(xmlProblems(s)).toEqual([]);
  });

  it("escapes &, <, > and quotes in every text", () => {
    const odd = result({ workload: "a&b<c>", cluster: `"q'` });
    odd.policies['x<y>&z"w'] = policy(0.5, 100, 10);
    const s = p90Chart(odd);
    expect(xmlProblems(s)).toEqual([]);
    expect(s).toContain("a&amp;b&lt;c&gt;");
    expect(s).toContain('data-policy="x&lt;y&gt;&amp;z&quot;w"');
    expect(s).not.toContain("<c>");
  });

  it("draws a NaN percentile as an empty bar labelled n/a", () => {
    const r = result();
    r.policies["ppd"]!.ttft_ms.p90 = NaN;
    const s = p90Chart(r);
    expect(xmlProblems(s)).toEqual([]);
    expect(s).not.toContain("NaN");
    expect(s).toContain(">n/a<");
  });
});

describe("attainmentVsLoadChart", () => {
  const loads = [0.4, 0.8, 1.2, 1.6];
  const sweep = loads.map((scale) => {
    const r = result({ load: { spec: `x${scale}`, scale, rps: 3 * scale } });
    for (const p of Object.values(r.policies)) p.slo_attainment = Math.max(0, p.slo_attainment - 0.3 * scale);
    return r;
  });
  const svg = attainmentVsLoadChart(sweep);

  it("is well-formed SVG with axes in req/s and %, ticks and a title saying simulated", () => {
    expect(xmlProblems(svg)).toEqual([]);
    expect(svg).toContain("SLO attainment vs load — hybrid, h20-72b, 3P1D (simulated)");
    expect(svg).toContain("arrival rate (req/s)");
    expect(svg).toContain("SLO attainment (%)");
    for (const t of ["0", "20", "100"]) expect(svg).toContain(`>${t}</text>`);
  });

  it("has one line per policy, each through every load, and a legend entry per policy", () => {
    const lines = [...svg.matchAll(/<path class="line" data-policy="([^"]+)" d="([^"]+)"/g)];
    expect(lines.map((l) => l[1]).sort()).toEqual([...POLICIES].sort());
    for (const l of lines) expect(l[2]!.split(/[ML]/).filter((s) => s.trim()).length).toBe(loads.length);
    const legend = /<g class="legend">[\s\S]*?<\/g>/.exec(svg)![0];
    for (const p of POLICIES) expect(legend).toContain(`>${p}</text>`);
  });

  it("sorts points by load and puts 100% at the top", () => {
    const shuffled = attainmentVsLoadChart([sweep[2]!, sweep[0]!, sweep[3]!, sweep[1]!]);
    expect(shuffled).toBe(svg);
  });

  it("falls back to the load scale, then to string loads in the given order", () => {
    const scaleOnly = sweep.map((r) => ({ ...r, load: { spec: "x", scale: (r.load as { scale: number }).scale } }));
    expect(attainmentVsLoadChart(scaleOnly)).toContain("load scale");
    const named = sweep.map((r, i) => ({ ...r, load: ["low", "mid", "high", "saturated"][i] }));
    const s = attainmentVsLoadChart(named);
    expect(xmlProblems(s)).toEqual([]);
    expect(s).toContain(">saturated</text>");
  });

  it("breaks a line where a policy is missing at one load", () => {
    const gappy = sweep.map((r, i) => {
      const policies = { ...r.policies };
      if (i === 1) delete policies["ppd"];
      return { ...r, policies };
    });
    const d = /<path class="line" data-policy="ppd" d="([^"]+)"/.exec(attainmentVsLoadChart(gappy))![1]!;
    expect(d.match(/M/g)).toHaveLength(2);
  });

  it("rejects a sweep over different workloads", () => {
    expect(() => attainmentVsLoadChart([sweep[0]!, { ...sweep[1]!, workload: "arxiv" }])).toThrow(/workload/);
  });
});

describe("niceTicks", () => {
  it.each([
    [0, 4.6, [0, 1, 2, 3, 4, 5]],
    [0, 110, [0, 25, 50, 75, 100, 125]],
    [1.2, 4.8, [1, 2, 3, 4, 5]],
    [0, 0, [0, 0.2, 0.4, 0.6, 0.8, 1]],
  ])("covers [%d, %d]", (lo, hi, want) => {
    expect(niceTicks(lo, hi, 5)).toEqual(want);
  });
});

describe("writeReport", () => {
  let dir = "";
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("writes report.md and one SVG per result and sweep into a new directory", () => {
    dir = mkdtempSync(join(tmpdir(), "dolphin-report-"));
    const out = join(dir, "nested", "out");
    const sweep = [0.5, 1].map((scale) => result({ load: { spec: "x", scale, rps: 3 * scale } }));
    const { markdown, files } = writeReport([result(), result({ split: "2P2D" }), result()], [sweep], out);
    expect(files.map((f) => basename(f))).toEqual([
      "report.md",
      "p90-hybrid-3p1d.svg",
      "p90-hybrid-2p2d.svg",
      "p90-hybrid-3p1d-2.svg",
      "attainment-vs-load-hybrid-3p1d.svg",
    ]);
    for (const f of files) expect(existsSync(f)).toBe(true);
    expect(readFileSync(files[0]!, "utf8")).toBe(markdown);
    expect(markdown).toContain("(simulated)");
    expect(markdown).toContain("](p90-hybrid-2p2d.svg)");
    expect(markdown).toContain("](attainment-vs-load-hybrid-3p1d.svg)");
    expect(markdown).toContain("SLO attainment vs load: hybrid");
    for (const f of files.slice(1)) expect(xmlProblems(readFileSync(f, "utf8"))).toEqual([]);
  });
});

describe("p90Chart axis", () => {
  it("breaks a bar far beyond the compared values instead of flattening the rest, and still prints its value", () => {
    const r = result();
    r.policies["always-local"] = policy(0, 2_633_000, 1076);
    const svg = p90Chart(r);
    expect(xmlProblems(svg)).toEqual([]);
    expect(svg).toContain('class="axis-break"');
    expect(svg).toContain("2633 s");
    // dolphin's and dynamo-isl's bars keep a readable length: neither is squeezed below a tenth of the panel
    const width = (name: string) => Number(new RegExp(`data-policy="${name}"[^>]*width="([0-9.]+)"`).exec(svg)![1]);
    expect(width("dolphin")).toBeGreaterThan(width("always-local") / 10);
  });
});
