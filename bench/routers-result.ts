// `dolphin bench routers`'s result: one run's figures per router, the summary of several runs (the median of each
// figure over the runs) with the target (dolphin serve's added latency ≤ the best peer router's at p50 and
// p99, each mode), and the text.

import { median, type Quantiles } from "./stats.js";

export interface ModeFigures {
  /** quantile(path) − quantile(direct two legs), ms. */
  added_latency_ms: Quantiles;
  latency_ms: Quantiles;
  failed: number;
  first_failure: string | null;
  /** Requests the prefill worker completed over requests sent through the path (1: every request two legs). */
  two_leg_share: number;
}

export interface RouterFigures extends ModeFigures {
  streaming: ModeFigures;
}

export type RouterName = "dolphin-learned" | "dolphin-dynamo-isl" | "vllm-router" | "smg";
export const DOLPHIN: RouterName[] = ["dolphin-learned", "dolphin-dynamo-isl"];
export const PEERS: RouterName[] = ["vllm-router", "smg"];
/**
 * The peers whose P/D mode is vLLM's NixlConnector protocol (a prefill leg marked do_remote_decode, the decode leg
 * pulling its KV): the target's yardstick. smg's vLLM P/D sends an unmarked prefill leg, so its decode worker
 * recomputes the prompt instead of pulling KV (less work for an emulated worker than the modeled pull): shown, not
 * compared.
 */
export const NIXL_PEERS: RouterName[] = ["vllm-router"];

export interface RoutersRun {
  rate: number;
  requests: number;
  rounds: number;
  time_scale: number;
  learned_table_bits: string;
  direct: RouterFigures;
  routers: Record<RouterName, RouterFigures & { policy: string }>;
  versions: Record<string, string>;
  commands: Record<string, string>;
  runtime: { cpus: number; cpu_model: string; quick: boolean };
}

export interface Target {
  /** The NIXL peer router with the least added latency at each quantile (among those with no failed request). */
  best_peer: { p50: RouterName | null; p99: RouterName | null };
  /**
   * Per dolphin variant: no request failed (a shed request's latency is not in its quantiles, so a router that sheds
   * would look faster) and its added latency ≤ the best peer's, at p50 and at p99.
   */
  met: Record<string, { p50: boolean; p99: boolean }>;
}

export interface RoutersSummary {
  summary: true;
  runs: number;
  rate: number;
  requests: number;
  time_scale: number;
  /** Medians over the runs. */
  added_latency_ms: Record<RouterName, { non_streaming: Quantiles; streaming: Quantiles }>;
  two_leg_share: Record<RouterName, { non_streaming: number; streaming: number }>;
  failed: Record<RouterName | "direct", number>;
  target: { non_streaming: Target; streaming: Target };
  policies: Record<RouterName, string>;
  versions: Record<string, string>;
}

const names = (r: RoutersRun): RouterName[] => Object.keys(r.routers) as RouterName[];

function target(
  added: RoutersSummary["added_latency_ms"],
  failed: RoutersSummary["failed"],
  mode: "non_streaming" | "streaming",
): Target {
  const best = (q: keyof Quantiles): RouterName | null =>
    NIXL_PEERS.filter((p) => failed[p] === 0).reduce<RouterName | null>(
      (b, p) => (b === null || added[p][mode][q] < added[b][mode][q] ? p : b),
      null,
    );
  const best_peer = { p50: best("p50"), p99: best("p99") };
  const met = Object.fromEntries(
    DOLPHIN.map((d) => [
      d,
      {
        p50: failed[d] === 0 && best_peer.p50 !== null && added[d][mode].p50 <= added[best_peer.p50][mode].p50,
        p99: failed[d] === 0 && best_peer.p99 !== null && added[d][mode].p99 <= added[best_peer.p99][mode].p99,
      },
    ]),
  );
  return { best_peer, met };
}

/** The medians of the runs' figures, failures summed, and the target on the medians. */
export function summarize(runs: RoutersRun[]): RoutersSummary {
  const first = runs[0]!;
  const q = (f: (r: RoutersRun) => Quantiles): Quantiles => ({
    p50: median(runs.map((r) => f(r).p50)),
    p99: median(runs.map((r) => f(r).p99)),
  });
  const added = {} as RoutersSummary["added_latency_ms"];
  const legs = {} as RoutersSummary["two_leg_share"];
  const failed = { direct: 0 } as RoutersSummary["failed"];
  for (const r of runs) failed.direct += r.direct.failed + r.direct.streaming.failed;
  for (const n of names(first)) {
    added[n] = {
      non_streaming: q((r) => r.routers[n].added_latency_ms),
      streaming: q((r) => r.routers[n].streaming.added_latency_ms),
    };
    legs[n] = {
      non_streaming: median(runs.map((r) => r.routers[n].two_leg_share)),
      streaming: median(runs.map((r) => r.routers[n].streaming.two_leg_share)),
    };
    failed[n] = runs.reduce((s, r) => s + r.routers[n].failed + r.routers[n].streaming.failed, 0);
  }
  return {
    summary: true,
    runs: runs.length,
    rate: first.rate,
    requests: first.requests,
    time_scale: first.time_scale,
    added_latency_ms: added,
    two_leg_share: legs,
    failed,
    target: { non_streaming: target(added, failed, "non_streaming"), streaming: target(added, failed, "streaming") },
    policies: Object.fromEntries(names(first).map((n) => [n, first.routers[n].policy])) as RoutersSummary["policies"],
    versions: first.versions,
  };
}

export function formatRoutersBench(s: RoutersSummary): string {
  const f = (x: Quantiles): string => `${x.p50.toFixed(3)} / ${x.p99.toFixed(3)}`;
  const rows = (Object.keys(s.added_latency_ms) as RouterName[]).map(
    (n) =>
      `  ${n.padEnd(19)} ${f(s.added_latency_ms[n].non_streaming).padEnd(17)} ${f(s.added_latency_ms[n].streaming).padEnd(17)} ` +
      `${s.two_leg_share[n].non_streaming} / ${s.two_leg_share[n].streaming}   ${s.failed[n]}   (${s.policies[n]})`,
  );
  const met = (t: Target): string =>
    `best peer p50 ${t.best_peer.p50}, p99 ${t.best_peer.p99}; ` +
    Object.entries(t.met)
      .map(([d, m]) => `${d} ${m.p50 ? "≤" : ">"} at p50, ${m.p99 ? "≤" : ">"} at p99`)
      .join("; ");
  return [
    `added latency over the direct two legs, ms (p50 / p99), median of ${s.runs} run(s) at ${s.rate} req/s, ` +
      `${s.requests} requests per path and mode, emulated 1P2D at --time-scale ${s.time_scale}`,
    `  ${"router".padEnd(19)} ${"non-streaming".padEnd(17)} ${"streaming".padEnd(17)} two legs  failed`,
    ...rows,
    `non-streaming: ${met(s.target.non_streaming)}`,
    `streaming: ${met(s.target.streaming)}`,
  ].join("\n");
}
