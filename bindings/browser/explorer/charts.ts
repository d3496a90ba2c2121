// The explorer's charts, drawn by uPlot (a small, maintained canvas charting library: ~50 KB, no dependencies, fast
// with thousands of points). Colours are the Okabe–Ito palette, readable with the common colour-vision deficiencies.

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { ClusterMapView, RoutedBy } from "./cluster-map.js";
import type { PolicyPoints, SweepResult } from "./jobs.js";

export const PALETTE = [
  "#0072B2",
  "#E69F00",
  "#009E73",
  "#CC79A7",
  "#56B4E9",
  "#D55E00",
  "#F0E442",
  "#000000",
  "#999999",
];

const WIDTH = 460;
const HEIGHT = 260;

/** One figure: a titled, labelled container (the canvas itself is not readable, so the caption says what it shows). */
function figure(parent: HTMLElement, title: string): HTMLElement {
  const fig = document.createElement("figure");
  const cap = document.createElement("figcaption");
  cap.textContent = title;
  fig.append(cap);
  parent.append(fig);
  return fig;
}

/** Empirical CDFs of one metric, one line per policy. Each series has its own x values, so they are merged on x. */
export function cdfChart(parent: HTMLElement, title: string, xLabel: string, series: Record<string, number[]>): uPlot {
  const names = Object.keys(series);
  const xs = [...new Set(names.flatMap((n) => series[n]!))].sort((a, b) => a - b);
  const ys = names.map((n) => {
    const sorted = series[n]!;
    let i = 0;
    return xs.map((x) => {
      while (i < sorted.length && sorted[i]! <= x) i++;
      return sorted.length ? i / sorted.length : null;
    });
  });
  return new uPlot(
    {
      title,
      width: WIDTH,
      height: HEIGHT,
      scales: { x: { time: false } },
      axes: [{ label: xLabel }, { label: "fraction of requests" }],
      series: [
        { label: xLabel },
        ...names.map((n, i) => ({
          label: n,
          stroke: PALETTE[i % PALETTE.length]!,
          width: 1.5,
          points: { show: false },
        })),
      ],
    },
    [xs, ...ys] as uPlot.AlignedData,
    figure(parent, `${title} (simulated)`),
  );
}

/** TTFT against prompt length for one policy, local requests and remote ones in two colours. */
export function scatterChart(parent: HTMLElement, title: string, p: PolicyPoints["scatter"]): uPlot {
  const order = p.promptTokens.map((_, i) => i).sort((a, b) => p.promptTokens[a]! - p.promptTokens[b]!);
  const xs = order.map((i) => p.promptTokens[i]!);
  const pick = (remote: number) => order.map((i) => (p.remote[i] === remote ? p.ttftMs[i]! : null));
  const dots = (stroke: string) => ({
    stroke,
    fill: stroke, // the legend's swatch (no area is drawn: paths return null)
    width: 0,
    paths: () => null,
    points: { show: true, size: 4, fill: stroke, stroke },
  });
  return new uPlot(
    {
      title,
      width: WIDTH,
      height: HEIGHT,
      legend: { live: false },
      scales: { x: { time: false } },
      axes: [{ label: "prompt tokens" }, { label: "TTFT (ms)" }],
      series: [
        { label: "prompt tokens" },
        { label: "local", ...dots(PALETTE[0]!) },
        { label: "remote", ...dots(PALETTE[1]!) },
      ],
    },
    [xs, pick(0), pick(1)] as uPlot.AlignedData,
    figure(parent, `${title} (simulated)`),
  );
}

/** The learner's search: reward per round and the best so far. */
export function trainingChart(parent: HTMLElement): { add(round: number, reward: number, best: number): void } {
  const data: [number[], number[], number[]] = [[], [], []];
  const plot = new uPlot(
    {
      title: "Search: SLO attainment per round",
      width: WIDTH,
      height: HEIGHT,
      scales: { x: { time: false } },
      axes: [{ label: "round" }, { label: "attainment" }],
      series: [
        { label: "round" },
        { label: "reward", stroke: PALETTE[0]!, points: { show: true, size: 4 } },
        { label: "best so far", stroke: PALETTE[5]!, width: 2 },
      ],
    },
    data,
    figure(parent, "The learner's search (simulated)"),
  );
  return {
    add(round, reward, best) {
      data[0].push(round);
      data[1].push(reward);
      data[2].push(best);
      plot.setData(data);
    },
  };
}

/** Attainment of each policy against load: one line per policy over the sweep's load points. */
export function sweepChart(parent: HTMLElement, r: SweepResult): uPlot {
  const names = Object.keys(r.attainment);
  return new uPlot(
    {
      title: `SLO attainment against load (${r.workload})`,
      width: WIDTH,
      height: HEIGHT,
      scales: { x: { time: false }, y: { range: [0, 1] } },
      axes: [{ label: "arrival rate (requests/s)" }, { label: "SLO attainment" }],
      series: [
        { label: "requests/s", value: (_u, v) => (v == null ? "" : v.toFixed(2)) },
        ...names.map((n, i) => ({
          label: n,
          stroke: PALETTE[i % PALETTE.length]!,
          width: 1.5,
          points: { show: true, size: 5 },
          value: (_u: uPlot, v: number | null) => (v == null ? "" : `${(100 * v).toFixed(1)}%`),
        })),
      ],
    },
    [r.points.map((p) => p.rps), ...names.map((n) => r.attainment[n]!)] as uPlot.AlignedData,
    figure(parent, "SLO attainment of every policy against the arrival rate (simulated)"),
  );
}

const ROUTED: { key: RoutedBy; label: string; colour: string }[] = [
  { key: "local", label: "request: local cluster", colour: PALETTE[0]! },
  { key: "remote", label: "request: remote cluster", colour: PALETTE[1]! },
  { key: "rule-cluster", label: "request: rule cluster", colour: PALETTE[2]! },
  { key: "out-of-distribution", label: "request: out of distribution", colour: PALETTE[3]! },
  { key: "load-out-of-range", label: "request: beyond its load bound", colour: PALETTE[5]! },
];
const CENTROID_VALUES = [
  { value: 0, label: "centroid: local", colour: PALETTE[0]! },
  { value: 1, label: "centroid: remote", colour: PALETTE[1]! },
  { value: 2, label: "centroid: rule", colour: PALETTE[2]! },
];

/**
 * A table's cluster map: requests (small dots, coloured by how the table decided them) and centroids (large squares,
 * labelled with their cluster number, coloured by value) on the first two principal components.
 */
export function clusterMapChart(parent: HTMLElement, view: ClusterMapView): uPlot {
  const all: { x: number; y: number; series: number }[] = [];
  view.points.xy.forEach(([x, y], i) =>
    all.push({ x, y, series: ROUTED.findIndex((r) => r.key === view.points.routedBy[i]) }),
  );
  view.centroids.forEach((c) => all.push({ x: c.xy[0], y: c.xy[1], series: ROUTED.length + Math.min(c.value, 2) }));
  all.sort((a, b) => a.x - b.x);
  const nSeries = ROUTED.length + CENTROID_VALUES.length;
  const ys = Array.from({ length: nSeries }, (_, s) => all.map((p) => (p.series === s ? p.y : null)));
  const dots = (colour: string, size: number, stroke = colour) => ({
    stroke,
    fill: colour, // the legend's swatch (no area is drawn: paths return null)
    width: 0,
    paths: () => null,
    points: { show: true, size, fill: colour, stroke, width: size > 8 ? 2 : 0 },
  });
  return new uPlot(
    {
      title: "Cluster map: requests and centroids on two principal components",
      width: WIDTH + 120,
      height: HEIGHT + 60,
      legend: { live: false },
      scales: { x: { time: false } },
      axes: [{ label: "component 1" }, { label: "component 2" }],
      series: [
        { label: "component 1" },
        ...ROUTED.map((r) => ({ label: r.label, ...dots(r.colour, 4) })),
        ...CENTROID_VALUES.map((c) => ({ label: c.label, ...dots(c.colour, 14, "#000") })),
      ],
      hooks: {
        draw: [
          (u: uPlot) => {
            const ctx = u.ctx;
            ctx.save();
            ctx.fillStyle = "#000";
            ctx.font = `${Math.round(12 * devicePixelRatio)}px system-ui, sans-serif`;
            view.centroids.forEach((c, i) => {
              const x = u.valToPos(c.xy[0], "x", true);
              const y = u.valToPos(c.xy[1], "y", true);
              ctx.fillText(`c${i}`, x + 9 * devicePixelRatio, y - 6 * devicePixelRatio);
            });
            ctx.restore();
          },
        ],
      },
    },
    [all.map((p) => p.x), ...ys] as uPlot.AlignedData,
    figure(parent, "Cluster map: requests coloured by how the table decided them, centroids labelled c0, c1, …"),
  );
}
