// A cluster's split into instance roles as the command line writes it: "3P1D" (prefill-only and decode-only
// instances), "4R" (replicas that both prefill and decode), or a mix like "1R1P2D".

export interface SplitSpec {
  replicas: number;
  prefill: number;
  decode: number;
}

/** "3P1D", "2P2D", "4R", "1R1P2D": replicas (prefill and decode on one instance), prefill-only, decode-only. */
export function parseSplit(s: string): SplitSpec {
  const m = /^(?:(\d+)R)?(?:(\d+)P)?(?:(\d+)D)?$/.exec(s.trim());
  const spec = m ? { replicas: Number(m[1] ?? 0), prefill: Number(m[2] ?? 0), decode: Number(m[3] ?? 0) } : null;
  if (!spec || spec.replicas + spec.prefill + spec.decode === 0 || spec.replicas + spec.decode === 0) {
    throw new Error(
      `expected nPmD, nR or a mix like 1R1P2D with at least one decode-capable instance, got ${JSON.stringify(s)}`,
    );
  }
  if (spec.replicas + spec.prefill + spec.decode > 1024) throw new Error(`at most 1024 instances, got ${s}`);
  return spec;
}
