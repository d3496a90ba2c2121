// The explorer's charts, drawn by uPlot (a small, maintained canvas charting library: ~50 KB, no dependencies, fast
// with thousands of points). Colours are the Okabe–Ito palette, readable with the common colour-vision deficiencies.

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import type { PolicyPoints } from "./jobs.js";

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
    width: 0,
    paths: () => null,
    points: { show: true, size: 4, fill: stroke, stroke },
  });
  return new uPlot(
    {
      title,
      width: WIDTH,
      height: HEIGHT,
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

/** A table's centroids on their first two principal components, coloured by bit (local or remote). */
export function clusterMapChart(parent: HTMLElement, xy: [number, number][], bits: number[]): uPlot {
  const order = xy.map((_, i) => i).sort((a, b) => xy[a]![0] - xy[b]![0]);
  const xs = order.map((i) => xy[i]![0]);
  const pick = (bit: number) => order.map((i) => (bits[i] === bit ? xy[i]![1] : null));
  const dots = (stroke: string) => ({
    stroke,
    width: 0,
    paths: () => null,
    points: { show: true, size: 12, fill: stroke, stroke },
  });
  return new uPlot(
    {
      title: "Cluster map: centroids on two principal components",
      width: WIDTH,
      height: HEIGHT,
      scales: { x: { time: false } },
      axes: [{ label: "component 1" }, { label: "component 2" }],
      series: [
        { label: "component 1" },
        { label: "bit 0: local", ...dots(PALETTE[0]!) },
        { label: "bit 1: remote", ...dots(PALETTE[1]!) },
      ],
    },
    [xs, pick(0), pick(1)] as uPlot.AlignedData,
    figure(parent, "Cluster map of the table's centroids, coloured by bit"),
  );
}
