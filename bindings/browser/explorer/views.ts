// What the explorer shows of a job's result: the comparison table and charts, the attainment-against-load sweep, and
// a table's description, cluster map, per-cluster attainment and guards. Pure rendering: no computing beyond
// formatting (everything was computed in the worker).

import type { ClusterMapView } from "./cluster-map.js";
import { cdfChart, clusterMapChart, scatterChart, sweepChart } from "./charts.js";
import type { EvalResult, SweepResult } from "./jobs.js";
import type { TableView } from "./protocol.js";

export const $ = <T extends HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`explorer: no element #${id}`);
  return el as T;
};

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const ms = (x: number) => x.toFixed(x < 100 ? 1 : 0);

/** Empties a table but its caption, and gives it a header row of these column names. */
function resetTable(table: HTMLTableElement, columns: string[]): HTMLTableSectionElement {
  const caption = table.caption;
  table.replaceChildren(...(caption ? [caption] : []));
  const head = table.createTHead().insertRow();
  for (const h of columns) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = h;
    head.append(th);
  }
  return table.createTBody();
}

/** A body row: a row header, then cells. */
function row(body: HTMLTableSectionElement, name: string, cells: string[]): HTMLTableRowElement {
  const tr = body.insertRow();
  const th = document.createElement("th");
  th.scope = "row";
  th.textContent = name;
  tr.append(th);
  for (const v of cells) tr.insertCell().textContent = v;
  return tr;
}

export function showComparison(r: EvalResult): void {
  const o = r.output;
  $("cmp-meta").textContent =
    `Simulated: ${o.workload} on ${o.cluster} ${o.split}, ${o.requests} requests at ${o.load.rps.toFixed(2)} req/s (load ${o.load.spec}), SLO ${o.slo.ttft_ms}/${o.slo.tpot_ms} ms; ` +
    `computed in this page, ${(Object.values(r.simulateMs).reduce((a, b) => a + b, 0) / 1000).toFixed(1)} s of simulation.`;
  const body = resetTable($<HTMLTableElement>("comparison"), [
    "policy",
    "SLO attainment",
    "TTFT P50 (ms)",
    "TTFT P90",
    "TTFT P99",
    "TPOT P50 (ms)",
    "TPOT P90",
    "TPOT P99",
    "local share",
    "throughput (tok/s)",
    "KV moved (GB)",
  ]);
  const rows = Object.entries(o.policies).sort((a, b) => b[1].slo_attainment - a[1].slo_attainment);
  for (const [name, p] of rows) {
    const tr = row(body, name, [
      pct(p.slo_attainment),
      ms(p.ttft_ms.p50),
      ms(p.ttft_ms.p90),
      ms(p.ttft_ms.p99),
      ms(p.tpot_ms.p50),
      ms(p.tpot_ms.p90),
      ms(p.tpot_ms.p99),
      pct(p.local_fraction),
      p.throughput_tokens_per_s.toFixed(0),
      ((p.kv_bytes_transferred ?? 0) / 1e9).toFixed(2),
    ]);
    tr.dataset["policy"] = name;
    tr.dataset["simulateMs"] = String(r.simulateMs[name] ?? 0);
  }
  const charts = $("charts");
  charts.replaceChildren();
  const names = rows.map(([n]) => n);
  cdfChart(charts, "TTFT CDF", "TTFT (ms)", Object.fromEntries(names.map((n) => [n, r.points[n]!.ttftSorted])));
  cdfChart(charts, "TPOT CDF", "TPOT (ms)", Object.fromEntries(names.map((n) => [n, r.points[n]!.tpotSorted])));
  const best = names[0];
  if (best) scatterChart(charts, `TTFT against prompt length: ${best}`, r.points[best]!.scatter);
}

export function showSweep(r: SweepResult): void {
  const base = r.load.spec === "saturated" ? "the saturated load" : `load ${r.load.spec}`;
  $("sweep-meta").textContent =
    `Simulated: ${r.workload} at ${r.points.map((p) => `${p.factor}×`).join(", ")} ${base} ` +
    `(${r.points.map((p) => p.rps.toFixed(2)).join(", ")} req/s); each point is dolphin eval --load x<scale>.`;
  const box = $("sweep-chart");
  box.replaceChildren();
  sweepChart(box, r);
  const table = $<HTMLTableElement>("sweep-table");
  const body = resetTable(table, ["policy", ...r.points.map((p) => `${p.factor}× (${p.rps.toFixed(2)} req/s)`)]);
  for (const [name, a] of Object.entries(r.attainment)) row(body, name, a.map(pct)).dataset["policy"] = name;
  r.points.forEach((p, i) => (table.tHead!.rows[0]!.cells[i + 1]!.dataset["scale"] = String(p.scale)));
  table.hidden = false;
}

const VALUE_NAMES = ["local", "remote", "rule"];

/** A table's description, its cluster map, and (once requests were routed) per-cluster attainment and guards. */
export function showTable(view: TableView): void {
  $("table-error").textContent = "";
  $("table-info").textContent = view.description;
  showMap(view.map);
}

export function clearTable(): void {
  $("table-info").textContent = "No table open.";
  showMap(null);
}

export function showMap(map: ClusterMapView | null): void {
  const box = $("cluster-map");
  box.replaceChildren();
  const table = $<HTMLTableElement>("clusters");
  table.hidden = map === null;
  $("guards").textContent = "";
  $("map-source").textContent = "";
  if (!map) return;
  $("map-source").textContent = map.source
    ? `Points: ${map.source}, standardized as the core standardizes them (the table carries no training points).`
    : "Centroids only: the table carries no training points. Press Run to place the current workload's requests on the map and get each cluster's attainment.";
  clusterMapChart(box, map);
  if (map.guards) {
    const g = map.guards;
    const n = g.cluster + g.ruleCluster + g.outOfDistribution + g.loadBound;
    const share = (x: number) => (n ? pct(x / n) : "–");
    $("guards").textContent =
      `Guards (table version ${map.version}): fallback rule ${g.fallback}; ` +
      (g.oodBounds ? "out-of-distribution bounds per cluster. " : "no out-of-distribution bounds. ") +
      (map.source
        ? `Of ${n} requests, ${share(g.cluster)} were decided by their cluster's bit, ${share(g.ruleCluster)} by the fallback rule in a rule cluster, ${share(g.outOfDistribution)} by the fallback rule as out of distribution` +
          (map.version >= 3 ? `, ${share(g.loadBound)} by the fallback rule beyond their cluster's load bound.` : ".")
        : "");
  } else
    $("guards").textContent = `Table version ${map.version}: no guards (every cluster has a bit; no fallback rule).`;
  const body = resetTable(table, [
    "cluster",
    "value",
    "requests",
    "SLO attainment",
    "OOD bound",
    "rule cluster",
    "out of distribution",
    "beyond load bound",
  ]);
  for (const c of map.clusters) {
    row(body, `c${c.cluster}`, [
      VALUE_NAMES[c.value] ?? String(c.value),
      String(c.requests),
      c.requests ? pct(c.met / c.requests) : "–",
      c.bound === null ? "none" : c.bound.toPrecision(4),
      String(c.ruleCluster),
      String(c.outOfDistribution),
      String(c.loadBound),
    ]).dataset["cluster"] = String(c.cluster);
  }
}
