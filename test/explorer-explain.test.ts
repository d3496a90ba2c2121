// The explain view's computation (bindings/browser/explorer/explain.ts): the inputs are checked with messages that
// name them, and a request's cached prefixes on P and D become eff_P and eff_D in whole blocks, as the core counts.
import { describe, expect, it } from "vitest";
import { loadCoreModule, Router } from "../bindings/node/index.js";
import { checkExplainInputs, EXPLAIN_WORKERS, explainRequest } from "../bindings/browser/explorer/explain.js";
import { ruleTable } from "../src/table/rule-table.js";
import { kmeansTable } from "./helpers.js";

const module = loadCoreModule();

describe("the explain view's request", () => {
  it("turns prompt length, cached tokens on P and D and osl_hat into the core's four features", () => {
    const r = Router.create(ruleTable("dynamo-isl"), { module, workers: [...EXPLAIN_WORKERS] });
    const e = explainRequest(r, { promptTokens: 5000, cachedP: 1000, cachedD: 3210, oslHat: 300 });
    // whole blocks of 16: 1000 → 992, 3210 → 3200
    expect(e.decision.features).toEqual({ isl: 5000, effP: 4008, effD: 1800, oslHat: 300 });
    expect(e.decision.bit).toBe(0); // eff_D 1800 < 2048 and 1800/5000 < 0.7: local
    expect(r.index.count("P0") + r.index.count("D0")).toBe(0); // the index is left empty
  });

  it("explains a learned table's choice with a score for every cluster", () => {
    const t = kmeansTable(
      [
        [-1, -1, -1, -1],
        [1, 1, 1, 1],
      ],
      [0, 1],
    );
    const r = Router.create(t, { module, workers: [...EXPLAIN_WORKERS] });
    const e = explainRequest(r, { promptTokens: 8000, cachedP: 0, cachedD: 0, oslHat: 2000 });
    expect(e.scores).toHaveLength(2);
    expect(e.decision.cluster).toBe(1);
    expect(e.decision.bit).toBe(1);
  });

  it("names the input that is out of range", () => {
    expect(() => checkExplainInputs({ promptTokens: 0, cachedP: 0, cachedD: 0, oslHat: 1 })).toThrow(
      /^prompt length: expected an integer from 1 to 1048576, got 0$/,
    );
    expect(() => checkExplainInputs({ promptTokens: 100, cachedP: 101, cachedD: 0, oslHat: 1 })).toThrow(
      /^cached tokens on P: expected an integer from 0 to 100, got 101$/,
    );
    expect(() => checkExplainInputs({ promptTokens: 100, cachedP: 0, cachedD: 0.5, oslHat: 1 })).toThrow(
      /^cached tokens on D: /,
    );
    expect(() => checkExplainInputs({ promptTokens: 100, cachedP: 0, cachedD: 0, oslHat: -1 })).toThrow(
      /^predicted output length: /,
    );
  });
});
