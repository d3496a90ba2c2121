// A table on a job's evaluation arrivals as `dolphin serve` would route them: through the serving drift guard and its
// mix-shift guard (src/sim/drift-guard-run.ts). `dolphin eval --drift-guard` prints it; the robustness study's
// "served" cells are it (issue 24, outcome 3: a study shows what serving would do, not only the table alone).

import type { PolicyOutcome } from "../report/eval-output.js";
import type { DriftGuardOptions, MixHandOverOptions } from "../router/drift-guard.js";
import { simulateWithDriftGuard, type DriftGuardReport } from "../sim/drift-guard-run.js";
import type { Table } from "../table/table.js";
import { scaledShared, setup, type JobOptions } from "./job.js";
import { policyOutcome } from "./policies.js";

export interface GuardedEval {
  outcome: PolicyOutcome;
  report: DriftGuardReport;
}

/** The drift guard's and the mix-shift guard's settings (each defaulted where absent; mix false: no mix guard). */
export interface ServedGuard {
  drift: DriftGuardOptions;
  mix: MixHandOverOptions | false;
}

/** The table on the evaluation arrivals `evalJob` used (the same scale), through the drift guard. */
export function evalWithDriftGuard(
  o: JobOptions,
  table: Table,
  scale: number,
  guard: ServedGuard = { drift: {}, mix: {} },
): GuardedEval {
  const s = setup({ ...o, scale });
  const { result, guard: report } = simulateWithDriftGuard(
    scaledShared(s.parts.eval, scale),
    { ...s.base, table },
    guard.drift,
    guard.mix,
  );
  return { outcome: policyOutcome(result.summary), report };
}
