// The public API, shared by every runtime entry.
export { Router, setDefaultModuleProvider } from "./router/router.js";
export type { Decision, Explanation, Features, RouteRequest, RouterOptions, WorkerSpec } from "./router/types.js";
export { createCore, instantiateCore } from "./core/core.js";
export { ReferenceEngine } from "./reference/engine.js";
export { CoreError, ErrorCode } from "./contract/errors.js";
export { decodeTable, encodeTable } from "./table/codec.js";
export { describeTable } from "./table/describe-table.js";
export { ruleTable } from "./table/rule-table.js";
export { TableError } from "./table/table.js";
export { validateTable } from "./table/validate.js";
export type { Table, PolicyKind, FeatureName, OslClasses, Provenance } from "./table/table.js";
export { toPairs, pairsToHex, pairsToBigInts } from "./hashing/hashes.js";
export type { Engine, CoreConfig } from "./contract/core-api.js";
export {
  ClusterMonitor,
  controlLeadZ,
  DRIFT_DEFAULTS,
  DriftGuard,
  learnedArmWorse,
  meetsSlo,
  validateDriftOptions,
} from "./router/drift-guard.js";
export type {
  ArmCounts,
  DriftArm,
  DriftClusterStatus,
  DriftEvent,
  DriftGuardOptions,
  DriftOutcome,
  DriftTicket,
  MixHandOverOptions,
  MixShiftEvent,
  MonitorChange,
} from "./router/drift-guard.js";
export { MIX_DEFAULTS, MixGuard, populationStabilityIndex } from "./router/mix-guard.js";
export type { MixChange, MixGuardOptions, MixStatus } from "./router/mix-guard.js";
