// A rule-kind table built in memory (the CLI's, the simulator's and the learner's baselines): defaults filled, a
// provenance when none is given, the checksum computed. Learned tables are built by the learner.

import { tableChecksum } from "./canonical.js";
import { expected } from "./fields.js";
import { isRuleKind } from "./params.js";
import { POLICY_KINDS, TABLE_FORMAT, type PolicyKind, type Provenance, type Table } from "./table.js";
import { validateBody } from "./validate.js";

/** A validated rule-kind table: defaults filled, provenance {tool: "dolphin-routing", created: now, workload:
 *  "(rule)", seed: 0} unless `extra.provenance` is given, checksum computed. */
export function ruleTable(kind: PolicyKind, params: Record<string, unknown> = {}, extra: Partial<Table> = {}): Table {
  if (!(POLICY_KINDS as readonly string[]).includes(kind) || !isRuleKind(kind)) {
    throw expected(
      "kind",
      `a rule kind (${POLICY_KINDS.filter(isRuleKind).join(", ")}); learned tables are built by the learner`,
      kind,
    );
  }
  const { checksum: _recomputed, ...rest } = extra;
  const provenance: Provenance = extra.provenance ?? {
    tool: "dolphin-routing",
    created: new Date().toISOString(),
    workload: "(rule)",
    seed: 0,
  };
  const body = validateBody({
    ...rest,
    format: TABLE_FORMAT,
    version: 1,
    kind,
    params: { ...extra.params, ...params },
    provenance,
  });
  return { ...body, checksum: tableChecksum(body) } as Table;
}
