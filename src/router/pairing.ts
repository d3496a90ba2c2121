// Compatibility groups: the KV handoff between a prefill and a decode engine fails when they differ in what NIXL
// checks (vLLM 0.32's compute_nixl_compatibility_hash: version, model, dtype, KV heads, layers, attention backend,
// cache dtype), so a remote prefill may go only to a worker of the decode worker's group. The core chooses among all
// workers and knows no groups; this is the Router's candidate filter around it, with the core and its tables as they
// are. While every worker is in one group (the usual case) nothing is done. With several (a rolling upgrade), the
// decode worker is chosen as before, then the request is routed again with it pinned and every prefill-capable worker
// of another group given the decode role for that one call: the core's prefill choice (prefill-role workers only)
// then sees only the decode worker's group, and a pinned decode worker makes the decode role's extra members
// irrelevant. A role change keeps a worker's index (only role 0 clears it), so the caches are untouched; the roles
// are put back before the call returns.

import { Role, type Engine } from "../contract/core-api.js";

export class CompatibilityGroups {
  private readonly groups: string[] = [];
  private readonly roles: number[] = [];
  private readonly capacities: number[] = [];
  private readonly sizes = new Map<string, number>();

  add(index: number, group: string, role: number, capacity: number): void {
    this.groups[index] = group;
    this.roles[index] = role;
    this.capacities[index] = capacity;
    this.sizes.set(group, (this.sizes.get(group) ?? 0) + 1);
  }

  remove(index: number): void {
    const group = this.groups[index];
    if (group === undefined) return;
    const left = this.sizes.get(group)! - 1;
    if (left > 0) this.sizes.set(group, left);
    else this.sizes.delete(group);
    this.roles[index] = Role.none;
    delete this.groups[index];
  }

  /** More than one group is in the pool: decisions need the filter. */
  get mixed(): boolean {
    return this.sizes.size > 1;
  }

  roleOf(index: number): number {
    return this.roles[index] ?? Role.none;
  }

  capacityOf(index: number): number {
    return this.capacities[index] ?? 0;
  }

  groupOf(index: number): string {
    return this.groups[index] ?? "";
  }

  /** The two workers may hand KV over: the same group. */
  compatible(a: number, b: number): boolean {
    return this.groups[a] === this.groups[b];
  }

  /** `fn`'s result, run with the prefill role held only by workers of `group` (see above); roles restored after. */
  within<T>(engine: Engine, group: string, fn: () => T): T {
    const moved: number[] = [];
    try {
      for (let i = 0; i < this.roles.length; i++) {
        const role = this.roles[i]!;
        if ((role & Role.prefill) === 0 || this.groups[i] === group) continue;
        engine.setWorker(i, Role.decode, this.capacities[i]!);
        moved.push(i);
      }
      return fn();
    } finally {
      for (const i of moved) engine.setWorker(i, this.roles[i]!, this.capacities[i]!);
    }
  }
}
