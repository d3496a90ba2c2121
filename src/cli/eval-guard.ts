// `dolphin eval --drift-guard`: the table once more on the same evaluation arrivals, routed through the serving drift
// guard and its mix-shift guard (src/sim/drift-guard-run.ts), so the study shows what `dolphin serve` would do with
// it: hand-overs on a mix-shift alarm, hand-backs, reverts and when they came, and the run's figures with the guard.

import type { GuardedEval } from "../learn/served-eval.js";
import { DRIFT_DEFAULTS, type DriftGuardOptions, type MixHandOverOptions } from "../router/drift-guard.js";
import { MIX_DEFAULTS } from "../router/mix-guard.js";
import type { Table } from "../table/table.js";
import { UsageError } from "./args.js";

const DRIFT_KEYS = Object.keys(DRIFT_DEFAULTS) as (keyof DriftGuardOptions)[];
const MIX_KEYS = { mixWindow: "window", psiAlarm: "psiAlarm", psiClear: "psiClear" } as const;

/** --guard-options "controlShare=0.2,windowS=120,mixWindow=100,psiAlarm=0.5,mix=off": the guard's options. */
export function parseGuardOptions(spec: string | undefined): {
  drift: DriftGuardOptions;
  mix: MixHandOverOptions | false;
} {
  const drift: Record<string, number> = {};
  const mix: Record<string, number> = {};
  let mixOn = true;
  for (const part of (spec ?? "").split(",").filter((p) => p.trim() !== "")) {
    const [key = "", value = ""] = part.split("=").map((s) => s.trim());
    if (key === "mix") {
      if (value !== "on" && value !== "off")
        throw new UsageError(`--guard-options: mix must be on or off, got ${value}`);
      mixOn = value === "on";
      continue;
    }
    const n = Number(value);
    if (value === "" || !Number.isFinite(n))
      throw new UsageError(`--guard-options: ${key} needs a number, got ${value}`);
    if ((DRIFT_KEYS as string[]).includes(key)) drift[key] = n;
    else if (key in MIX_KEYS) mix[MIX_KEYS[key as keyof typeof MIX_KEYS]] = n;
    else
      throw new UsageError(
        `--guard-options: unknown option ${key}; one of ${[...DRIFT_KEYS, ...Object.keys(MIX_KEYS), "mix"].join(", ")}`,
      );
  }
  return { drift, mix: mixOn ? mix : false };
}

/** The text lines `dolphin eval` prints under its table for the guarded run. */
export function guardLines(g: GuardedEval, table: Table): string[] {
  const r = g.report;
  const o = r.options;
  const lines = [
    `drift guard: control ${(100 * o.controlShare).toFixed(0)}%, window ${o.windowS} s, min ${o.minSamples} per arm, ` +
      `revert after ${o.revertAfterS} s; ` +
      (r.mixGuard
        ? `mix-shift guard on (${r.mixAlarms} alarm${r.mixAlarms === 1 ? "" : "s"})`
        : `mix-shift guard off (${table.cluster_share ? "no learned cluster or turned off" : "the table has no cluster_share"})`),
    `  reverts ${r.reverts}, hand-overs ${r.handovers}, hand-backs ${r.handbacks}, re-enables ${r.reenables}; ` +
      `learned clusters' requests routed by: learned value ${r.routed.learned}, control ${r.routed.control}, ` +
      `handed over ${r.routed.handedOver}, reverted ${r.routed.reverted}`,
  ];
  for (const t of r.timeToRevertS)
    lines.push(
      `  cluster ${t.cluster} reverted at ${t.sinceStartS.toFixed(0)} s` +
        (t.sinceHandoverS !== null ? ` (${t.sinceHandoverS.toFixed(0)} s after its hand-over)` : ""),
    );
  if (r.revertedAtEnd.length + r.handedOverAtEnd.length > 0)
    lines.push(`  at the end: reverted [${r.revertedAtEnd.join(", ")}], handed over [${r.handedOverAtEnd.join(", ")}]`);
  return lines;
}

/** Defaults, for the usage text. */
export const GUARD_DEFAULTS_TEXT = `controlShare=${DRIFT_DEFAULTS.controlShare},windowS=${DRIFT_DEFAULTS.windowS},minSamples=${DRIFT_DEFAULTS.minSamples},revertAfterS=${DRIFT_DEFAULTS.revertAfterS},mixWindow=${MIX_DEFAULTS.window},psiAlarm=${MIX_DEFAULTS.psiAlarm}`;
