// A table in one paragraph for humans (`dolphin table`, the proxy's admin endpoint, the policy explorer): kind,
// clusters or the rule's parameters (from spec/abi.json's summary templates), features, split, SLO, provenance.

import { KINDS } from "../generated/abi.js";
import { PPD_CONTEXT_CLASSES, PPD_RATIO_CLASSES, type RuleKind } from "./params.js";
import { CLUSTER_REMOTE, CLUSTER_RULE, DEFAULT_FALLBACK, type Table } from "./table.js";

const KIND_SUMMARY = new Map(KINDS.map((k) => [k.name, k.summary]));

function ruleSummary(kind: RuleKind, p: Record<string, unknown>): string {
  if (kind === "ppd") {
    const cells = ((p.bits ?? []) as number[][][]).flat(2);
    const remote = cells.filter((b) => b === 1).length;
    return (
      `turn 1 remote; later turns by a ${PPD_CONTEXT_CLASSES}×${PPD_RATIO_CLASSES}×${(p.qps_levels as number[]).length} ` +
      `(context, input/output ratio, QPS) table, ${cells.length - remote} cells local / ${remote} remote, ` +
      `w_ttft ${p.w_ttft}, w_tpot ${p.w_tpot}`
    );
  }
  // the spec's summary template, each {param} replaced by the table's value
  return (KIND_SUMMARY.get(kind) ?? kind).replace(/\{(\w+)\}/g, (_, name: string) => String(p[name]));
}

/** One paragraph for humans: kind, clusters, features, split, SLO, provenance. */
export function describeTable(t: Table): string {
  const parts: string[] = [];
  if (t.kind === "kmeans" || t.kind === "gmm") {
    const bits = t.bits ?? [];
    const remote = bits.filter((b) => b === CLUSTER_REMOTE).length;
    const rule = bits.filter((b) => b === CLUSTER_RULE).length;
    const model = t.kind === "kmeans" ? "k-means" : "Gaussian-mixture";
    parts.push(
      `${t.kind} table: K = ${bits.length} ${model} clusters over (${(t.features ?? []).join(", ")}), ` +
        `${bits.length - remote - rule} local / ${remote} remote` +
        (t.version >= 2 ? ` / ${rule} rule` : ""),
    );
    if (t.version >= 2) {
      const f = t.fallback ?? DEFAULT_FALLBACK;
      parts.push(
        `fallback rule ${f.kind} (${ruleSummary(f.kind, f.params)})` +
          (t.ood_bound ? `, out-of-distribution bounds per cluster` : ", no out-of-distribution bounds"),
      );
    }
    if (t.version >= 3) {
      parts.push(
        (t.load_bound ? "load bounds per cluster (prefill, decode)" : "no load bounds") +
          (t.cluster_share ? ", training share per cluster" : ", no cluster shares"),
      );
    }
  } else {
    parts.push(`${t.kind} rule table: ${ruleSummary(t.kind, t.params ?? {})}`);
  }
  if (t.osl_classes) {
    const c = t.osl_classes;
    parts.push(`output-length classes ${c.names.map((n, i) => `${n}→${c.representative[i]}`).join(", ")}`);
  }
  parts.push(t.split ? `learned for split ${t.split}` : "no split recorded");
  parts.push(t.slo ? `SLO TTFT ${t.slo.ttft_ms} ms, TPOT ${t.slo.tpot_ms} ms` : "no SLO recorded");
  const p = t.provenance;
  parts.push(
    `made by ${p.tool} on ${p.created} from workload ${JSON.stringify(p.workload)} (seed ${p.seed})` +
      (p.notes ? `: ${p.notes}` : ""),
  );
  return `${parts.join("; ")}; checksum ${t.checksum}.`;
}
