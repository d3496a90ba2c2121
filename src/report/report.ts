// `dolphin report`: eval and load-sweep results (what `dolphin eval --json` prints) as a markdown table and
// hand-written SVG charts — P90 TTFT and TPOT per policy with the paper's published deltas marked, and SLO
// attainment vs load. Every result here is simulated; the markdown and every chart say so.
// No dependencies and no I/O (browser-safe): the SVG is plain strings, escaped once in `xml()`; src/report/report-files.ts
// writes the files. The input's type and validator are in src/report/eval-output.ts.

import { ReportError, validateEvalOutput, type EvalOutput, type PolicyOutcome } from "./eval-output.js";
import { isPlainObject } from "../contract/values.js";

export { ReportError };

/**
 * Reads report input: one JSON eval result, a JSON array of them (a load sweep), or JSON lines (one result per
 * line). `source` names the input in errors ("<source>[2]: policies…" for the third element or line).
 */
export function parseReportInput(text: string, source: string): { results: EvalOutput[]; sweeps: EvalOutput[][] } {
  const trimmed = text.trim();
  let whole: unknown;
  try {
    whole = JSON.parse(trimmed);
  } catch {
    const lines = trimmed.split(/\r?\n/).filter((l) => l.trim() !== "");
    const results = lines.map((l, i) => {
      let v: unknown;
      try {
        v = JSON.parse(l);
      } catch {
        throw new ReportError(`${source}: line ${i + 1}: not JSON`);
      }
      return validateEvalOutput(v, `${source}:${i + 1}`);
    });
    return { results, sweeps: [] };
  }
  if (Array.isArray(whole)) {
    const sweep = whole.map((v, i) => validateEvalOutput(v, `${source}[${i}]`));
    checkSweep(sweep, source);
    return { results: [], sweeps: [sweep] };
  }
  return { results: [validateEvalOutput(whole, source)], sweeps: [] };
}

// ---------------------------------------------------------------------------------------------------------------
// The paper's figures

export type PaperKind = "hybrid" | "trace" | "single";

export interface PaperDelta {
  /** Relative P90 TTFT change of DolphinRouting vs Dynamo, [best, worst] (negative = better). */
  ttftP90: readonly [number, number];
  /** Relative P90 TPOT change, [best, worst]. */
  tpotP90: readonly [number, number];
  /** The published figure in words. */
  text: string;
  /** The workload it was measured on. */
  setting: string;
  source: string;
}

/**
 * The paper's published P90 deltas vs Dynamo's rule (real cluster: Qwen 72B on H20 nodes, k-means, the two P/D
 * splits it tested, ranges across those splits — the seeds give no per-split figure). Single-type workloads are
 * "level or slightly behind": no number is published, so the marker is Dynamo's own value.
 */
export const PAPER_DELTAS: { readonly hybrid: PaperDelta; readonly trace: PaperDelta; readonly single: PaperDelta } = {
  hybrid: {
    ttftP90: [-0.079, -0.075],
    tpotP90: [-0.101, -0.065],
    text: "P90 TTFT −7.5…−7.9%, P90 TPOT −6.5…−10.1%",
    setting: "hybrid workload, two P/D splits",
    source:
      'seed 000 line 25: "On Hybrid the TTFT drop is 7.5–7.9% and the TPOT drop 6.5–10.1% across the two splits"; seed 001 line 27',
  },
  trace: {
    ttftP90: [-0.065, -0.057],
    tpotP90: [-0.055, -0.026],
    text: "P90 TTFT −5.7…−6.5%, P90 TPOT −2.6…−5.5%",
    setting: "real trace, two P/D splits",
    source: 'seed 000 line 25: "on the real trace it is 5.7–6.5% and 2.6–5.5%"; seed 001 line 27',
  },
  single: {
    ttftP90: [0, 0],
    tpotP90: [0, 0],
    text: "level with Dynamo or slightly behind (no figure published)",
    setting: "single-type benchmarks",
    source: 'seed 000 line 25: "On the three pure benchmarks the router is level with Dynamo or slightly behind"',
  },
};

const SINGLE_TYPE = /arxiv|leval|l-eval|humaneval/i;

/**
 * Which of the paper's workload kinds a result's workload corresponds to: "hybrid"; the single-type benchmarks
 * (arxiv, leval, humaneval); a trace file (any other name); null for multiturn (the paper has no such figure).
 * A result may override with a string field `paper_kind` ("hybrid" | "trace" | "single" | "none").
 */
export function paperKind(r: EvalOutput): PaperKind | null {
  const override = r["paper_kind"];
  if (override === "hybrid" || override === "trace" || override === "single") return override;
  if (override === "none") return null;
  const w = r.workload.toLowerCase();
  if (w === "hybrid") return "hybrid";
  if (w === "multiturn") return null;
  if (SINGLE_TYPE.test(w)) return "single";
  return "trace";
}

// ---------------------------------------------------------------------------------------------------------------
// Numbers

export interface Deltas {
  /** dolphin P90 TTFT / baseline P90 TTFT − 1 (negative = better). */
  ttftP90: number;
  tpotP90: number;
  /** SLO attainment difference in percentage points (positive = better). */
  attainment: number;
}

/** Relative P90 deltas (x / base − 1) and the attainment difference in points of `policy` against `baseline`. */
export function deltasVsBaseline(r: EvalOutput, policy = "dolphin", baseline = "dynamo-isl"): Deltas {
  const p = r.policies[policy],
    b = r.policies[baseline];
  if (!p) throw new ReportError(`no "${policy}" policy in the ${r.workload} ${r.split} result`);
  if (!b) throw new ReportError(`no "${baseline}" policy in the ${r.workload} ${r.split} result`);
  const rel = (x: number, base: number): number => (base > 0 ? x / base - 1 : NaN);
  return {
    ttftP90: rel(p.ttft_ms.p90, b.ttft_ms.p90),
    tpotP90: rel(p.tpot_ms.p90, b.tpot_ms.p90),
    attainment: 100 * (p.slo_attainment - b.slo_attainment),
  };
}

const MINUS = "\u2212";
const signed = (x: number, digits: number): string =>
  !Number.isFinite(x) ? "n/a" : (x < 0 ? MINUS : x > 0 ? "+" : "±") + Math.abs(x).toFixed(digits);
const pct = (fraction: number): string => `${signed(100 * fraction, 1)}%`;

function describeLoad(load: unknown): string {
  if (typeof load === "string") return load;
  if (typeof load === "number") return `${load}`;
  if (isPlainObject(load)) {
    const parts: string[] = [];
    if (typeof load["scale"] === "number") parts.push(`×${fmt(load["scale"], 2)}`);
    if (typeof load["rps"] === "number") parts.push(`${fmt(load["rps"], 2)} req/s`);
    const spec = typeof load["spec"] === "string" ? load["spec"] : "";
    if (spec && parts.length) return `${spec} (${parts.join(", ")})`;
    return spec || parts.join(", ") || JSON.stringify(load);
  }
  return load === undefined ? "unspecified" : JSON.stringify(load);
}

function fmt(x: number, digits: number): string {
  return Number.isFinite(x) ? x.toFixed(digits) : "n/a";
}
const ms = (x: number): string => (!Number.isFinite(x) ? "n/a" : x >= 100 ? x.toFixed(0) : x.toFixed(1));

/** Policies by SLO attainment, best first (ties by name), the order of the table and the bar chart. */
function byAttainment(r: EvalOutput): [string, PolicyOutcome][] {
  return Object.entries(r.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment || (a[0] < b[0] ? -1 : 1));
}

// ---------------------------------------------------------------------------------------------------------------
// Markdown

/** Text for a markdown table cell or line: no pipes, no raw HTML. */
function md(s: string): string {
  return s
    .replace(/\\/g, "\\\\")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/\|/g, "\\|")
    .replace(/\r?\n/g, " ");
}

function headerLine(r: EvalOutput): string {
  return (
    `simulated cluster — workload ${r.workload}, cluster ${r.cluster}, split ${r.split}, ` +
    `SLO TTFT ${r.slo.ttft_ms} ms / TPOT ${r.slo.tpot_ms} ms, load ${describeLoad(r.load)}, ${r.requests} requests`
  );
}

/** "dolphin vs dynamo-isl: P90 TTFT −x.x%, P90 TPOT −y.y%, attainment +z.z points (paper: …)". */
export function comparisonLine(r: EvalOutput, policy = "dolphin", baseline = "dynamo-isl"): string {
  const kind = paperKind(r);
  const paper = kind
    ? `paper, real cluster, ${PAPER_DELTAS[kind].setting}: ${PAPER_DELTAS[kind].text}`
    : "paper: no published figure for this workload";
  if (!r.policies[policy] || !r.policies[baseline]) {
    return `${policy} vs ${baseline}: not available (the result lacks ${r.policies[policy] ? baseline : policy}) (${paper})`;
  }
  const d = deltasVsBaseline(r, policy, baseline);
  return (
    `${policy} vs ${baseline}: P90 TTFT ${pct(d.ttftP90)}, P90 TPOT ${pct(d.tpotP90)}, ` +
    `SLO attainment ${signed(d.attainment, 1)} points (${paper})`
  );
}

/** One section per result: a header saying "simulated", the policy table (best attainment first), the comparison. */
export function markdownTable(results: EvalOutput[]): string {
  const sections = results.map((r) => {
    const rows = byAttainment(r).map(([name, p]) => {
      const cells = [
        name === "dolphin" ? `**${md(name)}**` : md(name),
        fmt(100 * p.slo_attainment, 1),
        ms(p.ttft_ms.p50),
        ms(p.ttft_ms.p90),
        ms(p.ttft_ms.p99),
        ms(p.tpot_ms.p50),
        ms(p.tpot_ms.p90),
        ms(p.tpot_ms.p99),
        fmt(p.throughput_tokens_per_s, 0),
        fmt(100 * p.local_fraction, 1),
        String(p.failed),
      ];
      return `| ${cells.join(" | ")} |`;
    });
    return [
      `## ${md(r.workload)} · ${md(r.cluster)} · ${md(r.split)} (simulated)`,
      "",
      md(headerLine(r)),
      "",
      "| policy | SLO attainment % | TTFT p50 ms | TTFT p90 ms | TTFT p99 ms | TPOT p50 ms | TPOT p90 ms | TPOT p99 ms | tok/s | local % | failed |",
      "|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
      ...rows,
      "",
      md(comparisonLine(r)),
    ].join("\n");
  });
  return sections.join("\n\n") + (sections.length ? "\n" : "");
}

/** A load sweep as markdown: SLO attainment % per policy (rows) at each load (columns). */
export function markdownSweep(sweep: EvalOutput[]): string {
  const points = sweepPoints(sweep);
  const first = points[0]!.r;
  const names = policyNames(sweep);
  const head = `| policy | ${points.map((p) => md(p.label)).join(" | ")} |`;
  const rule = `|:--|${points.map(() => "--:").join("|")}|`;
  const rows = names.map(
    (n) =>
      `| ${n === "dolphin" ? `**${md(n)}**` : md(n)} | ${points
        .map((p) => {
          const pr = p.r.policies[n];
          return pr ? fmt(100 * pr.slo_attainment, 1) : "–";
        })
        .join(" | ")} |`,
  );
  return (
    [
      `## SLO attainment vs load: ${md(first.workload)} · ${md(first.cluster)} · ${md(first.split)} (simulated)`,
      "",
      md(
        `simulated cluster — SLO TTFT ${first.slo.ttft_ms} ms / TPOT ${first.slo.tpot_ms} ms; ${points.length} loads (${points[0]!.axis}); SLO attainment %`,
      ),
      "",
      head,
      rule,
      ...rows,
    ].join("\n") + "\n"
  );
}

// ---------------------------------------------------------------------------------------------------------------
// SVG helpers

/** Escapes text and attribute values for XML. */
export function xml(s: string): string {
  return s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&apos;");
}

const FONT = "Helvetica, Arial, sans-serif";
const INK = "#222",
  MUTED = "#666",
  GRID = "#e3e3e3",
  AXIS = "#888";
const DOLPHIN = "#e8590c",
  DYNAMO = "#4e79a7",
  OTHER = "#b9c3cc",
  PAPER = "#b2182b";
const PALETTE = [
  "#59a14f",
  "#b07aa1",
  "#76b7b2",
  "#edc948",
  "#9c755f",
  "#ff9da7",
  "#e15759",
  "#17becf",
  "#7f7f7f",
  "#bcbd22",
];

const HALO = 'stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke"';
const n2 = (x: number): string => (Math.round(x * 10) / 10).toString();

function svgOpen(width: number, height: number, title: string): string {
  return (
    `<?xml version="1.0" encoding="UTF-8"?>\n` +
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ` +
    `font-family="${FONT}" font-size="12" role="img">\n` +
    `<title>${xml(title)}</title>\n<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>\n`
  );
}

function text(x: number, y: number, s: string, attrs = ""): string {
  return `<text x="${n2(x)}" y="${n2(y)}"${attrs ? " " + attrs : ""}>${xml(s)}</text>`;
}

/** Rough width of a string at `size` px in a sans-serif font (layout only; DejaVu Sans, the widest common fallback). */
const textWidth = (s: string, size: number): number => s.length * size * 0.6;

/** Text at `size` px, shrunk (down to 9 px) to fit `maxPx`. */
function fitText(x: number, y: number, maxPx: number, size: number, s: string, attrs: string): string {
  const fitted = Math.max(9, Math.min(size, Math.floor((maxPx / textWidth(s, 1)) * 2) / 2));
  return text(x, y, s, `font-size="${fitted}" ${attrs}`);
}

function truncate(s: string, maxPx: number, size: number): string {
  if (textWidth(s, size) <= maxPx) return s;
  const keep = Math.max(1, Math.floor(maxPx / (size * 0.6)) - 1);
  return s.slice(0, keep) + "…";
}

/** Ticks 1, 2 or 5 × 10^k covering [lo, hi] with about `count` steps. */
export function niceTicks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) hi = lo + (lo === 0 ? 1 : Math.abs(lo));
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * mag >= raw) ?? 10) * mag;
  const start = Math.floor(lo / step + 1e-9) * step,
    end = Math.ceil(hi / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let v = start; v <= end + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

const tickLabel = (v: number): string =>
  Math.abs(v) >= 1e4 ? `${n2(v / 1000)}k` : Number(v.toPrecision(6)).toString();

/** A time axis in ms or s, whichever reads better for values up to `maxMs`. */
function timeUnit(maxMs: number): { unit: "ms" | "s"; div: number } {
  return maxMs >= 2000 ? { unit: "s", div: 1000 } : { unit: "ms", div: 1 };
}
function timeValue(vMs: number, u: { unit: string; div: number }): string {
  if (!Number.isFinite(vMs)) return "n/a";
  const v = vMs / u.div;
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${u.unit}`;
}

// ---------------------------------------------------------------------------------------------------------------
// P90 chart

/**
 * P90 TTFT (left panel) and P90 TPOT (right panel) per policy as horizontal bars, policies in table order; dolphin
 * highlighted, Dynamo's value as a dashed guide, and on dolphin's row the paper's published delta band drawn at
 * dynamo-isl × (1 + delta). Standalone SVG, ~720 px wide.
 */
export function p90Chart(r: EvalOutput): string {
  const rows = byAttainment(r);
  const kind = paperKind(r);
  const paper = kind ? PAPER_DELTAS[kind] : null;
  const dyn = r.policies["dynamo-isl"];
  const showPaper = paper !== null && dyn !== undefined && r.policies["dolphin"] !== undefined;

  const W = 720,
    rowH = 26,
    barH = 16;
  const labelW = 120,
    left = 14 + labelW,
    right = W - 18,
    gap = 48;
  const panelW = (right - left - gap) / 2;
  const top = 88,
    plotH = rows.length * rowH,
    bottom = top + plotH;
  const legendY = bottom + 58;
  const H = legendY + (showPaper || paper === null ? 40 : 22);

  const title = `P90 TTFT and TPOT per policy — ${r.workload}, ${r.cluster}, ${r.split} (simulated)`;
  const out: string[] = [svgOpen(W, H, title)];
  out.push(fitText(W / 2, 24, W - 20, 15, title, `text-anchor="middle" font-weight="bold" fill="${INK}"`));
  out.push(
    fitText(
      W / 2,
      44,
      W - 20,
      12,
      `simulated cluster, not a measurement · SLO TTFT ${r.slo.ttft_ms} ms, TPOT ${r.slo.tpot_ms} ms · load ${describeLoad(r.load)} · ${r.requests} requests`,
      `text-anchor="middle" fill="${MUTED}"`,
    ),
  );

  // policy labels, shared by both panels
  rows.forEach(([name], i) => {
    const y = top + i * rowH + rowH / 2 + 4;
    const hl = name === "dolphin";
    out.push(
      `<text x="${left - 8}" y="${n2(y)}" text-anchor="end" fill="${INK}"${hl ? ' font-weight="bold"' : ""}>` +
        `<title>${xml(name)}</title>${xml(truncate(name, labelW - 6, 12))}</text>`,
    );
  });

  const panels = [
    { metric: "ttft_ms" as const, label: "P90 TTFT", delta: paper?.ttftP90 },
    { metric: "tpot_ms" as const, label: "P90 TPOT", delta: paper?.tpotP90 },
  ];
  panels.forEach((panel, pi) => {
    const x0 = left + pi * (panelW + gap);
    const values = rows.map(([, p]) => p[panel.metric].p90);
    const base = dyn?.[panel.metric].p90 ?? NaN;
    const marks = showPaper && panel.delta && Number.isFinite(base) ? panel.delta.map((d) => base * (1 + d)) : [];
    const finite = [...values, ...marks].filter(Number.isFinite);
    // The axis covers what is compared (dolphin, dynamo-isl, the paper's band) with room to spare; a policy far beyond
    // (e.g. always-local in overload) is drawn broken at the edge with its value, so it cannot flatten the rest.
    const dol = rows.find(([name]) => name === "dolphin")?.[1][panel.metric].p90;
    const focus = [dol ?? NaN, base, ...marks].filter(Number.isFinite);
    const cap = focus.length ? 3 * Math.max(...focus) : Infinity;
    const maxV = finite.length ? Math.min(Math.max(...finite), cap) : 1;
    const u = timeUnit(maxV);
    // headroom for the value labels at the bar ends
    const ticks = niceTicks(0, (Math.max(maxV, 1e-9) * 1.22) / u.div, 4);
    const domain = (ticks[ticks.length - 1] ?? 1) * u.div;
    const sx = (vMs: number): number => x0 + (Math.min(Math.max(0, vMs), domain) / domain) * panelW;

    out.push(`<g class="panel" data-metric="${panel.metric}">`);
    out.push(
      text(
        x0 + panelW / 2,
        top - 14,
        `${panel.label} (${u.unit}, lower is better)`,
        `text-anchor="middle" font-size="13" font-weight="bold" fill="${INK}"`,
      ),
    );
    for (const t of ticks) {
      const x = sx(t * u.div);
      out.push(`<line x1="${n2(x)}" y1="${top}" x2="${n2(x)}" y2="${bottom}" stroke="${GRID}"/>`);
      out.push(`<line x1="${n2(x)}" y1="${bottom}" x2="${n2(x)}" y2="${bottom + 4}" stroke="${AXIS}"/>`);
      out.push(text(x, bottom + 16, tickLabel(t), `text-anchor="middle" font-size="11" fill="${MUTED}"`));
    }
    out.push(`<line x1="${x0}" y1="${top}" x2="${x0}" y2="${bottom}" stroke="${AXIS}"/>`);
    out.push(`<line x1="${x0}" y1="${bottom}" x2="${n2(x0 + panelW)}" y2="${bottom}" stroke="${AXIS}"/>`);
    out.push(text(x0 + panelW / 2, bottom + 34, `${panel.label} (${u.unit})`, `text-anchor="middle" fill="${INK}"`));

    // Dynamo's value as a guide behind the bars
    if (Number.isFinite(base)) {
      const x = sx(base);
      out.push(
        `<line class="baseline-guide" x1="${n2(x)}" y1="${top - 2}" x2="${n2(x)}" y2="${bottom}" stroke="${DYNAMO}" stroke-dasharray="3 3" stroke-opacity="0.8"/>`,
      );
    }
    const bandEnd = marks.length ? sx(Math.max(...marks)) + 2 : -Infinity;
    rows.forEach(([name, p], i) => {
      const v = p[panel.metric].p90;
      const y = top + i * rowH + (rowH - barH) / 2;
      const fill = name === "dolphin" ? DOLPHIN : name === "dynamo-isl" ? DYNAMO : OTHER;
      const w = Number.isFinite(v) ? Math.max(0.5, sx(v) - x0) : 0;
      out.push(
        `<rect class="bar" data-policy="${xml(name)}" x="${x0}" y="${n2(y)}" width="${n2(w)}" height="${barH}" fill="${fill}">` +
          `<title>${xml(`${name}: ${panel.label} ${timeValue(v, { unit: "ms", div: 1 })}`)}</title></rect>`,
      );
      if (v > domain) {
        // off the axis: a break mark near the end, the value inside the bar
        const bx = x0 + panelW - 18;
        out.push(
          `<path class="axis-break" d="M${n2(bx)} ${n2(y + barH + 2)} l6 ${-(barH + 4)} M${n2(bx + 5)} ${n2(y + barH + 2)} l6 ${-(barH + 4)}" stroke="#fff" stroke-width="2"/>`,
        );
        out.push(text(bx - 4, y + barH / 2 + 4, timeValue(v, u), `text-anchor="end" font-size="11" fill="#fff"`));
        return;
      }
      // dolphin's label clears the paper band drawn on its row; a white halo keeps labels readable over guides
      const labelX = (name === "dolphin" ? Math.max(x0 + w, bandEnd) : x0 + w) + 4;
      out.push(
        text(
          labelX,
          y + barH / 2 + 4,
          timeValue(v, u),
          `font-size="11" fill="${name === "dolphin" ? INK : MUTED}"${name === "dolphin" ? ' font-weight="bold"' : ""} ${HALO}`,
        ),
      );
    });

    const di = rows.findIndex(([name]) => name === "dolphin");
    if (marks.length === 2 && di >= 0) {
      const [a, b] = [sx(Math.min(marks[0]!, marks[1]!)), sx(Math.max(marks[0]!, marks[1]!))];
      const y1 = top + di * rowH + 1,
        y2 = top + (di + 1) * rowH - 1;
      const note =
        `paper: ${panel.label} dynamo-isl × (1 ${panel.delta![0] <= 0 ? MINUS : "+"} ` +
        `${(Math.abs(panel.delta![1]) * 100).toFixed(1)}…${(Math.abs(panel.delta![0]) * 100).toFixed(1)}%) = ` +
        `${timeValue(Math.min(...marks), u)}…${timeValue(Math.max(...marks), u)}`;
      out.push(`<g class="paper-target" data-metric="${panel.metric}"><title>${xml(note)}</title>`);
      out.push(
        `<rect x="${n2(a - 1)}" y="${n2(y1)}" width="${n2(b - a + 2)}" height="${n2(y2 - y1)}" fill="${PAPER}" fill-opacity="0.22"/>`,
      );
      for (const x of a === b ? [a] : [a, b]) {
        out.push(
          `<line x1="${n2(x)}" y1="${n2(y1)}" x2="${n2(x)}" y2="${n2(y2)}" stroke="${PAPER}" stroke-width="2"/>`,
        );
      }
      out.push(`</g>`);
    }
    out.push(`</g>`);
  });

  // legend
  const items: string[] = [];
  const LEGEND_X = 14;
  let x = LEGEND_X;
  const swatch = (color: string, label: string): void => {
    items.push(`<rect x="${n2(x)}" y="${legendY - 10}" width="12" height="12" fill="${color}"/>`);
    items.push(text(x + 17, legendY, label, `fill="${INK}"`));
    x += 17 + textWidth(label, 12) + 18;
  };
  swatch(DOLPHIN, "dolphin");
  swatch(DYNAMO, "dynamo-isl (baseline)");
  swatch(OTHER, "other policies");
  items.push(
    `<line x1="${n2(x)}" y1="${legendY - 11}" x2="${n2(x)}" y2="${legendY + 2}" stroke="${DYNAMO}" stroke-dasharray="3 3"/>`,
  );
  items.push(text(x + 6, legendY, "dynamo-isl's P90", `fill="${INK}"`));
  const y2 = legendY + 20;
  if (showPaper && paper) {
    items.push(
      `<rect x="${LEGEND_X}" y="${y2 - 10}" width="12" height="12" fill="${PAPER}" fill-opacity="0.22" stroke="${PAPER}" stroke-width="1.5"/>`,
    );
    items.push(
      fitText(
        LEGEND_X + 17,
        y2,
        W - LEGEND_X - 17 - 8,
        11,
        `paper (real cluster, ${paper.setting}), dolphin vs dynamo-isl: ${paper.text}`,
        `fill="${INK}"`,
      ),
    );
  } else if (paper === null) {
    items.push(text(LEGEND_X, y2, "paper: no published figure for this workload", `font-size="11" fill="${MUTED}"`));
  }
  out.push(`<g class="legend">`, ...items, `</g>`);
  out.push(`</svg>\n`);
  return out.join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// SLO attainment vs load

interface SweepPoint {
  r: EvalOutput;
  x: number;
  label: string;
  axis: string;
}

/** Every result of a sweep must share workload, cluster and split. */
function checkSweep(sweep: EvalOutput[], source = "sweep"): void {
  const first = sweep[0];
  if (!first) throw new ReportError(`${source}: a load sweep needs at least one result`);
  sweep.forEach((r, i) => {
    for (const k of ["workload", "cluster", "split"] as const) {
      if (r[k] !== first[k]) {
        throw new ReportError(
          `${source}[${i}]: ${k}: expected "${first[k]}" like the first result of the sweep, got "${r[k]}"`,
        );
      }
    }
  });
}

/** The x of each sweep point: req/s when every result has load.rps, else the load scale, else a number in the load spec, else the order. */
function sweepPoints(sweep: EvalOutput[]): SweepPoint[] {
  checkSweep(sweep);
  const get = (r: EvalOutput, k: string): number | undefined => {
    const l = r.load;
    const v = isPlainObject(l) ? l[k] : undefined;
    return typeof v === "number" && Number.isFinite(v) ? v : undefined;
  };
  const fromSpec = (r: EvalOutput): number | undefined => {
    const s =
      typeof r.load === "number"
        ? String(r.load)
        : typeof r.load === "string"
          ? r.load
          : isPlainObject(r.load) && typeof r.load["spec"] === "string"
            ? r.load["spec"]
            : "";
    const m = /^\s*x?\s*(\d+(?:\.\d+)?)\s*x?\s*$/i.exec(s);
    return m ? Number(m[1]) : undefined;
  };
  const pick = (
    f: (r: EvalOutput) => number | undefined,
    axis: string,
    label: (v: number) => string,
  ): SweepPoint[] | null => {
    const xs = sweep.map(f);
    if (!xs.every((v): v is number => v !== undefined)) return null;
    return sweep.map((r, i) => ({ r, x: xs[i]!, label: label(xs[i]!), axis })).sort((a, b) => a.x - b.x);
  };
  return (
    pick(
      (r) => get(r, "rps"),
      "arrival rate (req/s)",
      (v) => `${fmt(v, 2)} req/s`,
    ) ??
    pick(
      (r) => get(r, "scale"),
      "load scale (× the workload's rate)",
      (v) => `×${fmt(v, 2)}`,
    ) ??
    pick(fromSpec, "load", (v) => String(v)) ??
    sweep.map((r, i) => ({ r, x: i, label: describeLoad(r.load), axis: "load (as given)" }))
  );
}

/** Policy names across a sweep, best SLO attainment at the highest load first (the legend reads like the lines end). */
function policyNames(sweep: EvalOutput[]): string[] {
  const all = new Set<string>();
  for (const r of sweep) for (const n of Object.keys(r.policies)) all.add(n);
  const points = sweepPoints(sweep);
  const last = (n: string): number => {
    for (let i = points.length - 1; i >= 0; i--) {
      const p = points[i]!.r.policies[n];
      if (p) return p.slo_attainment;
    }
    return -1;
  };
  return [...all].sort((a, b) => last(b) - last(a) || (a < b ? -1 : a > b ? 1 : 0));
}

/** SLO attainment (0–100%) against load, one line per policy with a legend. Standalone SVG, 720 × 400. */
export function attainmentVsLoadChart(sweep: EvalOutput[]): string {
  const points = sweepPoints(sweep);
  const first = points[0]!.r;
  const names = policyNames(sweep);
  const categorical = points[0]!.axis === "load (as given)";

  const W = 720,
    H = 400;
  const left = 64,
    right = 540,
    top = 70,
    bottom = 330;
  const title = `SLO attainment vs load — ${first.workload}, ${first.cluster}, ${first.split} (simulated)`;
  const out: string[] = [svgOpen(W, H, title)];
  out.push(fitText(W / 2, 24, W - 20, 15, title, `text-anchor="middle" font-weight="bold" fill="${INK}"`));
  out.push(
    fitText(
      W / 2,
      44,
      W - 20,
      12,
      `simulated cluster, not a measurement · SLO TTFT ${first.slo.ttft_ms} ms, TPOT ${first.slo.tpot_ms} ms (end to end)`,
      `text-anchor="middle" fill="${MUTED}"`,
    ),
  );

  const xs = points.map((p) => p.x);
  let xTicks: { v: number; label: string }[];
  let lo: number, hi: number;
  if (categorical) {
    lo = -0.5;
    hi = points.length - 0.5;
    xTicks = points.map((p) => ({ v: p.x, label: p.label }));
  } else {
    const t = niceTicks(Math.min(...xs), Math.max(...xs), 5);
    lo = t[0]!;
    hi = t[t.length - 1]!;
    xTicks = t.map((v) => ({ v, label: tickLabel(v) }));
  }
  const sx = (v: number): number => left + ((v - lo) / (hi - lo)) * (right - left);
  const sy = (fraction: number): number => bottom - fraction * (bottom - top);

  for (let p = 0; p <= 100; p += 20) {
    const y = sy(p / 100);
    out.push(`<line x1="${left}" y1="${n2(y)}" x2="${right}" y2="${n2(y)}" stroke="${GRID}"/>`);
    out.push(`<line x1="${left - 4}" y1="${n2(y)}" x2="${left}" y2="${n2(y)}" stroke="${AXIS}"/>`);
    out.push(text(left - 8, y + 4, `${p}`, `text-anchor="end" font-size="11" fill="${MUTED}"`));
  }
  for (const t of xTicks) {
    const x = sx(t.v);
    out.push(`<line x1="${n2(x)}" y1="${top}" x2="${n2(x)}" y2="${bottom}" stroke="${GRID}"/>`);
    out.push(`<line x1="${n2(x)}" y1="${bottom}" x2="${n2(x)}" y2="${bottom + 4}" stroke="${AXIS}"/>`);
    out.push(text(x, bottom + 17, truncate(t.label, 90, 11), `text-anchor="middle" font-size="11" fill="${MUTED}"`));
  }
  out.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${bottom}" stroke="${AXIS}"/>`);
  out.push(`<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="${AXIS}"/>`);
  out.push(text((left + right) / 2, bottom + 38, points[0]!.axis, `text-anchor="middle" fill="${INK}"`));
  out.push(
    text(
      18,
      (top + bottom) / 2,
      "SLO attainment (%)",
      `text-anchor="middle" fill="${INK}" transform="rotate(-90 18 ${n2((top + bottom) / 2)})"`,
    ),
  );

  // lines, drawn so dolphin ends on top
  let paletteIndex = 0;
  const styles = names.map((n) => {
    if (n === "dolphin") return { color: DOLPHIN, width: 3, dash: "" };
    if (n === "dynamo-isl") return { color: DYNAMO, width: 2.5, dash: "" };
    const i = paletteIndex++;
    return {
      color: PALETTE[i % PALETTE.length]!,
      width: 1.6,
      dash: i >= PALETTE.length ? ' stroke-dasharray="5 3"' : "",
    };
  });
  const order = names.map((_, i) => i).reverse();
  for (const i of order) {
    const name = names[i]!,
      s = styles[i]!;
    const pts = points.map((p) => {
      const pr = p.r.policies[name];
      return pr ? { x: sx(p.x), y: sy(pr.slo_attainment), v: pr.slo_attainment, label: p.label } : null;
    });
    // a missing point breaks the line: a new "M" starts the next run
    let d = "",
      pen = false;
    for (const p of pts) {
      if (p) {
        d += `${pen ? " L" : d ? " M" : "M"}${n2(p.x)},${n2(p.y)}`;
        pen = true;
      } else pen = false;
    }
    out.push(`<g class="series" data-policy="${xml(name)}">`);
    out.push(
      `<path class="line" data-policy="${xml(name)}" d="${d}" fill="none" stroke="${s.color}" stroke-width="${s.width}" stroke-linejoin="round"${s.dash}/>`,
    );
    for (const p of pts) {
      if (!p) continue;
      out.push(
        `<circle cx="${n2(p.x)}" cy="${n2(p.y)}" r="${name === "dolphin" ? 4 : 3}" fill="${s.color}">` +
          `<title>${xml(`${name} at ${p.label}: ${fmt(100 * p.v, 1)}%`)}</title></circle>`,
      );
    }
    out.push(`</g>`);
  }

  // legend
  out.push(`<g class="legend">`);
  out.push(text(556, top + 4, "policy", `font-weight="bold" fill="${INK}"`));
  const step = Math.min(20, (bottom - top - 10) / Math.max(1, names.length));
  names.forEach((name, i) => {
    const y = top + 22 + i * step,
      s = styles[i]!;
    out.push(
      `<line x1="556" y1="${n2(y - 4)}" x2="580" y2="${n2(y - 4)}" stroke="${s.color}" stroke-width="${s.width}"${s.dash}/>`,
    );
    out.push(
      `<text x="586" y="${n2(y)}" fill="${INK}"${name === "dolphin" ? ' font-weight="bold"' : ""}><title>${xml(name)}</title>${xml(truncate(name, W - 590, 12))}</text>`,
    );
  });
  out.push(`</g>`);
  out.push(`</svg>\n`);
  return out.join("\n");
}

// ---------------------------------------------------------------------------------------------------------------
// The whole report

/** A file-name part: lowercase letters, digits, dots and dashes. */
function slug(s: string): string {
  return (
    s
      .toLowerCase()
      .replace(/[^a-z0-9.]+/g, "-")
      .replace(/^[-.]+|-+$/g, "") || "x"
  );
}

/**
 * The report: report.md's text, one P90 chart per result (p90-<workload>-<split>.svg) and one attainment-vs-load
 * chart per sweep (attainment-vs-load-<workload>-<split>.svg), file names made unique. src/report/report-files.ts writes it.
 */
export function buildReport(
  results: EvalOutput[],
  sweeps: EvalOutput[][],
): { markdown: string; svgs: { name: string; svg: string }[] } {
  const used = new Set<string>();
  const unique = (base: string): string => {
    let name = `${base}.svg`;
    for (let i = 2; used.has(name); i++) name = `${base}-${i}.svg`;
    used.add(name);
    return name;
  };
  const svgs: { name: string; svg: string }[] = [];
  const parts: string[] = [
    "# dolphin report (simulated)",
    "",
    "Every number below comes from the discrete-event simulator, not a real cluster. The paper's figures " +
      "(real cluster, Qwen 72B on H20 nodes, vs Dynamo's rule) are quoted for orientation only.",
    "",
  ];
  for (const r of results) {
    const name = unique(`p90-${slug(r.workload)}-${slug(r.split)}`);
    svgs.push({ name, svg: p90Chart(r) });
    parts.push(
      markdownTable([r]),
      `![P90 TTFT and TPOT per policy, ${md(r.workload)} ${md(r.split)} (simulated)](${name})`,
      "",
    );
  }
  for (const sweep of sweeps) {
    const first = sweep[0];
    if (!first) continue;
    const name = unique(`attainment-vs-load-${slug(first.workload)}-${slug(first.split)}`);
    svgs.push({ name, svg: attainmentVsLoadChart(sweep) });
    parts.push(
      markdownSweep(sweep),
      `![SLO attainment vs load, ${md(first.workload)} ${md(first.split)} (simulated)](${name})`,
      "",
    );
  }
  return { markdown: parts.join("\n"), svgs };
}
