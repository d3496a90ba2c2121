// `dolphin bench tiers`: what cache tiers cost the route hot path. A 20,000-token prompt (1,250 blocks) against 16
// decode workers holding prefixes of it of 78 … 1,250 blocks; the baseline holds them on the device only, the tiered
// index the same with the second half of each prefix offloaded and evicted from the device (CPU only), so that
// every scored worker's matched prefix is walked for its lower-tier blocks (equal loads: every worker is scored).
// Both measured in the same run, alternated, medians.

import { Router } from "../src/router/router.js";
import { ruleTable } from "../src/table/rule-table.js";

export interface TiersBenchResult {
  route_device_only_us: number;
  route_half_cpu_only_us: number;
  ratio: number;
}

function router(module: WebAssembly.Module, tokens: number[], lower: boolean): Router {
  const workers = Array.from({ length: 16 }, (_, i) => ({ id: `w${i}`, role: "decode" as const }));
  const r = Router.create(ruleTable("dynamo-isl"), { module, workers, capacityBlocks: 4000, indexBlocks: 1 << 17 });
  const h = r.hash({ tokens });
  for (let i = 0; i < 16; i++) {
    const n = Math.floor((1250 * (i + 1)) / 16);
    r.index.store(`w${i}`, h.subarray(0, 2 * n));
    if (!lower) continue;
    const half = h.subarray(2 * Math.floor(n / 2), 2 * n);
    r.index.store(`w${i}`, half, "CPU");
    r.index.remove(`w${i}`, half, "GPU");
  }
  return r;
}

export function runTiersBench(module: WebAssembly.Module, rounds = 15, calls = 200): TiersBenchResult {
  const tokens = Array.from({ length: 20_000 }, (_, i) => (i * 2654435761) % 150_000);
  const request = { tokens, oslHat: 100 };
  const [device, tiered] = [router(module, tokens, false), router(module, tokens, true)];
  const time = (r: Router): number => {
    const t = process.hrtime.bigint();
    for (let i = 0; i < calls; i++) r.route(request);
    return Number(process.hrtime.bigint() - t) / calls / 1000;
  };
  time(device);
  time(tiered);
  const a: number[] = [];
  const b: number[] = [];
  for (let k = 0; k < rounds; k++) {
    a.push(time(device));
    b.push(time(tiered));
  }
  const median = (x: number[]): number => x.sort((p, q) => p - q)[x.length >> 1]!;
  const [d, t] = [median(a), median(b)];
  return { route_device_only_us: d, route_half_cpu_only_us: t, ratio: t / d };
}

export function formatTiersBench(r: TiersBenchResult): string {
  return [
    "route, 20,000 tokens (1,250 blocks), 16 decode workers, every one scored:",
    `  device-only index         ${r.route_device_only_us.toFixed(1)} µs`,
    `  half of each prefix CPU   ${r.route_half_cpu_only_us.toFixed(1)} µs (${r.ratio.toFixed(2)}×)`,
  ].join("\n");
}
