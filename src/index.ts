// The public API, shared by every runtime entry.
export { Router, setDefaultModuleProvider } from "./router.js";
export type { Decision, Explanation, Features, RouteRequest, RouterOptions, WorkerSpec } from "./router.js";
export { createCore, instantiateCore } from "./core.js";
export { ReferenceEngine } from "./reference/engine.js";
export { CoreError, ErrorCode } from "./errors.js";
export { decodeTable, encodeTable, ruleTable, validateTable, TableError, describeTable } from "./table.js";
export type { Table, PolicyKind, FeatureName, OslClasses, Provenance } from "./table.js";
export { toPairs, pairsToHex, pairsToBigInts } from "./hashes.js";
export type { Engine, CoreConfig } from "./core-api.js";
export {
  ClusterMonitor,
  controlLeadZ,
  DRIFT_DEFAULTS,
  DriftGuard,
  learnedArmWorse,
  meetsSlo,
  validateDriftOptions,
} from "./drift-guard.js";
export type {
  ArmCounts,
  DriftArm,
  DriftClusterStatus,
  DriftEvent,
  DriftGuardOptions,
  DriftOutcome,
  DriftTicket,
  MonitorChange,
} from "./drift-guard.js";
