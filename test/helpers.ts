// Shared test fixtures: the built core modules, routers on either engine, simple tables.
import { loadCoreModule, type CoreFlavour } from "../bindings/node/index.js";
import { Router } from "../src/router/router.js";
import type { RouterOptions } from "../src/router/types.js";
import { ruleTable } from "../src/table/rule-table.js";
import type { Table } from "../src/table/table.js";
import { validateTable } from "../src/table/validate.js";

export function coreModule(flavour: CoreFlavour = "debug"): WebAssembly.Module {
  return loadCoreModule(flavour);
}

export function routerOn(
  engine: "wasm" | "reference",
  table: Table | Uint8Array,
  options: RouterOptions,
  flavour: CoreFlavour = "debug",
): Router {
  return Router.create(table, { ...options, engine, ...(engine === "wasm" ? { module: coreModule(flavour) } : {}) });
}

export const PROVENANCE = { tool: "dolphin-routing tests", created: "2026-11-29T00:00:00Z", workload: "test", seed: 1 };

/** A k-means table over the four features with the given centroids (standardized space) and bits. */
export function kmeansTable(centroids: number[][], bits: number[], extra: Partial<Table> = {}): Table {
  const d = centroids[0]?.length ?? 4;
  const features = (["isl", "eff_P", "eff_D", "osl_hat"] as const).slice(0, d);
  return validateTable({
    format: "dolphin-routing.table",
    version: 1,
    kind: "kmeans",
    features: [...features],
    scaler: { mean: Array(d).fill(7), std: Array(d).fill(2) },
    centroids,
    bits,
    provenance: PROVENANCE,
    checksum: "xxh64:0000000000000000",
    ...extra,
  });
}

export { ruleTable };

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it holds; fails after `timeoutMs` (a bound, not a wait: it returns as soon as it holds). */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}
