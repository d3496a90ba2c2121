// The attainment-vs-load chart of one load sweep: SLO attainment (0–100%) against load, one line per policy
// (dolphin and dynamo-isl in their own colours, drawn on top) with a legend; a missing point breaks the line.

import type { EvalOutput } from "./eval-output.js";
import { fmt } from "./numbers.js";
import { policyNames, sweepPoints } from "./sweep.js";
import {
  AXIS,
  DOLPHIN,
  DYNAMO,
  GRID,
  INK,
  MUTED,
  n2,
  niceTicks,
  PALETTE,
  chartHead,
  text,
  tickLabel,
  truncate,
  xml,
} from "./svg.js";

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
  const out: string[] = chartHead(
    W,
    H,
    title,
    `simulated cluster, not a measurement · SLO TTFT ${first.slo.ttft_ms} ms, TPOT ${first.slo.tpot_ms} ms (end to end)`,
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
