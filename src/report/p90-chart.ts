// The P90 chart of one result: P90 TTFT and P90 TPOT per policy as horizontal bars, dolphin highlighted, Dynamo's
// value as a guide and the paper's published delta band on dolphin's row. A policy far off the axis is drawn broken.

import type { EvalOutput } from "./eval-output.js";
import { byAttainment, describeLoad, MINUS } from "./numbers.js";
import { PAPER_DELTAS, paperKind } from "./paper.js";
import {
  AXIS,
  DOLPHIN,
  DYNAMO,
  fitText,
  GRID,
  HALO,
  INK,
  MUTED,
  n2,
  niceTicks,
  OTHER,
  PAPER,
  chartHead,
  text,
  textWidth,
  tickLabel,
  timeUnit,
  timeValue,
  truncate,
  xml,
} from "./svg.js";

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
  const out: string[] = chartHead(
    W,
    H,
    title,
    `simulated cluster, not a measurement · SLO TTFT ${r.slo.ttft_ms} ms, TPOT ${r.slo.tpot_ms} ms · load ${describeLoad(r.load)} · ${r.requests} requests`,
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
