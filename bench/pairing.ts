// What compatibility groups cost a decision (src/router/pairing.ts, docs/serving.md "Compatibility groups"):
// Router.route over 32 workers (8 prefill, 24 decode) with one group (the baseline: the core's call as it is) and with
// two (a rolling upgrade half-way: a probe, then the call with the decode worker pinned and the other group's prefill
// workers moved out of the role), alternated round by round in the same process.
//
//   node dist/bench/pairing.js [--rounds 10] [--calls 2000]

import { parseArgs } from "node:util";
import { loadCoreModule } from "../src/core/core-file.js";
import { Router } from "../src/router/router.js";
import { ruleTable } from "../src/table/rule-table.js";

const { values } = parseArgs({ options: { rounds: { type: "string" }, calls: { type: "string" } } });
const rounds = Number(values.rounds ?? 10);
const calls = Number(values.calls ?? 2000);
const module = loadCoreModule("release");

function fleet(groups: 1 | 2): Router {
  const workers = Array.from({ length: 32 }, (_, i) => ({
    id: `w${i}`,
    role: i % 4 === 0 ? ("prefill" as const) : ("decode" as const),
    group: groups === 1 ? "" : `g${i % 2}`,
  }));
  return Router.create(ruleTable("dynamo-isl"), { module, workers });
}

const prompts = Array.from({ length: 256 }, (_, k) => Array.from({ length: 2048 }, (_, i) => (k * 131 + i) % 32000));
const routers = { one: fleet(1), two: fleet(2) };
for (const r of Object.values(routers))
  for (let k = 0; k < 64; k++) r.index.store(`w${k % 32}`, r.hash({ tokens: prompts[k]! }));
const perCall: Record<keyof typeof routers, number[]> = { one: [], two: [] };
for (let round = 0; round < rounds; round++) {
  for (const name of round % 2 === 0 ? (["one", "two"] as const) : (["two", "one"] as const)) {
    const r = routers[name];
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) r.route({ tokens: prompts[i % prompts.length]! });
    perCall[name].push(((performance.now() - t0) * 1000) / calls);
  }
}
const median = (a: number[]): number => [...a].sort((x, y) => x - y)[a.length >> 1]!;
const [one, two] = [median(perCall.one), median(perCall.two)];
console.log(
  `Router.route, 32 workers, 2,048-token prompts, median of ${rounds} alternated rounds of ${calls}: ` +
    `one group ${one.toFixed(1)} µs (baseline), two groups ${two.toFixed(1)} µs (${(two / one).toFixed(2)}×)`,
);
