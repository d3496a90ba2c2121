// The Router's compatibility groups (src/router/pairing.ts): a remote prefill goes only to a worker of the decode
// worker's group, on both engines, with the caches and roles as they were after the call.
import { describe, expect, it } from "vitest";
import { ruleTable } from "../src/table/rule-table.js";
import { routerOn } from "./helpers.js";

const tokens = Array.from({ length: 640 }, (_, i) => (i * 7919) % 32000);

describe.each(["wasm", "reference"] as const)("Router compatibility groups (%s)", (engine) => {
  const fleet = (groups: boolean) =>
    routerOn(engine, ruleTable("always-remote"), {
      workers: [
        { id: "p-old", role: "prefill", ...(groups ? { group: "v1" } : {}) },
        { id: "p-new", role: "prefill", ...(groups ? { group: "v2" } : {}) },
        { id: "d-old", role: "decode", ...(groups ? { group: "v1" } : {}) },
      ],
    });

  it("pairs a decode worker only with a prefill worker of its group, even when another group's caches more", () => {
    for (const groups of [false, true]) {
      const r = fleet(groups);
      r.index.store("p-new", r.hash({ tokens })); // the new revision's prefill worker holds the prompt
      const d = r.route({ tokens });
      expect(d.decodeWorker).toBe("d-old");
      expect(d.prefillWorker).toBe(groups ? "p-old" : "p-new");
      expect(d.path).toBe("remote");
      // the roles and the index are as before: the next decision sees p-new's cache again
      expect(r.index.count("p-new")).toBe(40);
      expect(r.explain({ tokens }).decision.prefillWorker).toBe(d.prefillWorker);
    }
  });

  it("routes locally when the decode worker's group has no prefill worker", () => {
    const r = routerOn(engine, ruleTable("always-remote"), {
      workers: [
        { id: "p-new", role: "prefill", group: "v2" },
        { id: "d-old", role: "decode", group: "v1" },
      ],
    });
    const d = r.route({ tokens });
    expect(d.path).toBe("local");
    expect(d.prefillWorker).toBeNull();
    expect(d.reason).toBe("no-prefill-worker");
  });

  it("pins a session's decode worker and still pairs within its group; a worker moved to another group follows", () => {
    const r = routerOn(engine, ruleTable("always-remote"), {
      workers: [
        { id: "p-a", role: "prefill", group: "a" },
        { id: "p-b", role: "prefill", group: "b" },
        { id: "d-a", role: "decode", group: "a" },
        { id: "d-b", role: "decode", group: "b" },
      ],
    });
    expect(r.route({ tokens, decodeWorker: "d-b" }).prefillWorker).toBe("p-b");
    expect(r.route({ tokens, decodeWorker: "d-a" }).prefillWorker).toBe("p-a");
    r.setWorkerGroup("p-b", "a");
    r.setWorkerGroup("p-a", "b");
    expect(r.route({ tokens, decodeWorker: "d-b" }).prefillWorker).toBe("p-a");
  });

  it("records a decision on the paired workers only (approximate mode)", () => {
    const r = routerOn(engine, ruleTable("always-remote"), {
      recordDecisions: true,
      workers: [
        { id: "p-old", role: "prefill", group: "v1" },
        { id: "p-new", role: "prefill", group: "v2" },
        { id: "d-old", role: "decode", group: "v1" },
      ],
    });
    r.index.store("p-new", r.hash({ tokens: tokens.slice(0, 320) }));
    const d = r.route({ tokens });
    expect(d.prefillWorker).toBe("p-old");
    expect(r.index.count("p-old")).toBe(40);
    expect(r.index.count("d-old")).toBe(40);
    expect(r.index.count("p-new")).toBe(20); // what it held, nothing recorded for it
  });
});
