// The drift guard in `dolphin serve`, over real sockets: a learned cluster whose learned value (local prefill) misses
// the table's SLO while its fallback rule (remote prefill) meets it is reverted to the rule, and /metrics and the log
// say so. The fake workers here make the two paths' latencies plain: local prefill is slow, remote is fast.
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { DRIFT_DEFAULTS } from "../src/router/drift-guard.js";
import { MIX_DEFAULTS } from "../src/router/mix-guard.js";
import { parseConfig } from "../src/serve/config.js";
import { startProxy, type RunningProxy } from "../src/serve/proxy.js";
import { encodeTable } from "../src/table/codec.js";
import type { Table } from "../src/table/table.js";
import { coreModule, kmeansTable } from "./helpers.js";

const MODEL = "drift-model";
/** Budget of a 3-token answer: 500 + 2 × 10 = 520 ms end to end; local prefill alone takes twice that. */
const SLO = { ttft_ms: 500, tpot_ms: 10 };
const LOCAL_PREFILL_MS = 1000;

const servers: http.Server[] = [];
const proxies: RunningProxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => resolve());
        }),
    ),
  );
});

const send = (res: ServerResponse, body: unknown): void => {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

/** A vLLM-like worker: prefill-only requests get KV handoff parameters; a decode without a handoff prefills slowly. */
async function fakeWorker(): Promise<string> {
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.url === "/health") return send(res, {});
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}") as Record<string, unknown>;
      const kv = body["kv_transfer_params"] as Record<string, unknown> | undefined;
      const usage = { prompt_tokens: 10, completion_tokens: 3 };
      if (kv?.["do_remote_decode"] === true)
        return send(res, { choices: [{ index: 0, text: "x" }], usage, kv_transfer_params: { remote_engine_id: "e" } });
      const answer = () => send(res, { choices: [{ index: 0, message: { role: "assistant", content: "hi" } }], usage });
      if (kv) answer();
      else setTimeout(answer, LOCAL_PREFILL_MS);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** One cluster, valued local; its fallback rule sends everything remote. */
function tableFile(): string {
  return writeTable(
    kmeansTable([[0, 0, 0, 0]], [0], {
      version: 2,
      fallback: { kind: "always-remote", params: {} },
      ood_bound: [1e9],
      slo: SLO,
    }),
  );
}

/** Two clusters (local, remote) learned on half and half: every chat here falls in cluster 0, a departed mix. */
function twoClusterTableFile(): string {
  return writeTable(
    kmeansTable(
      [
        [0, 0, 0, 0],
        [3, 3, 3, 3],
      ],
      [0, 1],
      {
        version: 3,
        fallback: { kind: "always-remote", params: {} },
        ood_bound: [1e9, 1e9],
        slo: SLO,
        cluster_share: [0.5, 0.5],
      },
    ),
  );
}

function writeTable(t: Table): string {
  const path = join(mkdtempSync(join(tmpdir(), "dolphin-drift-")), "table.msgpack");
  writeFileSync(path, encodeTable(t));
  return path;
}

const chat = (p: RunningProxy): Promise<Response> =>
  fetch(`${p.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hello there" }], max_tokens: 3 }),
  });

async function metrics(p: RunningProxy): Promise<string> {
  return (await fetch(`${p.url}/metrics`)).text();
}

/** A proxy over two fake workers (a prefill and a decode) routing by the table file, its log lines into `lines`. */
async function proxyOn(
  table: string,
  drift: Record<string, number>,
  logLevel: "warn" | "info",
  lines: string[],
): Promise<RunningProxy> {
  const [prefill, decode] = await Promise.all([fakeWorker(), fakeWorker()]);
  const p = await startProxy(
    {
      model: MODEL,
      listen: { host: "127.0.0.1", port: 0 },
      log_level: logLevel,
      table,
      workers: [
        { id: "prefill-0", url: prefill, role: "prefill" },
        { id: "decode-0", url: decode, role: "decode" },
      ],
      drift,
    },
    { module: coreModule("release"), log: (l) => lines.push(l) },
  );
  proxies.push(p);
  return p;
}

describe("dolphin serve drift guard", () => {
  it("reverts a learned cluster that loses to its fallback rule, and shows it in /metrics and the log", async () => {
    const lines: string[] = [];
    const drift = {
      control_share: 0.5,
      min_samples: 8,
      z_revert: 2,
      min_gap: 0.1,
      window_s: 60,
      revert_after_s: 0,
      seed: 7,
    };
    const p = await proxyOn(tableFile(), drift, "warn", lines);

    // a first batch: both arms seen, too few for the test
    const first = await Promise.all(Array.from({ length: 10 }, () => chat(p)));
    expect(first.every((r) => r.status === 200)).toBe(true);
    const routes = first.map((r) => r.headers.get("x-dolphin-route"));
    expect(routes).toContain("local");
    expect(routes).toContain("remote");
    let text = await metrics(p);
    expect(text).toMatch(/^dolphin_drift_attainment\{arm="learned",cluster="0"\} 0$/m);
    const control = Number(/^dolphin_drift_attainment\{arm="control",cluster="0"\} (.+)$/m.exec(text)?.[1]);
    expect(control).toBeGreaterThan(0.5); // the remote path is quick (a loaded machine may still miss a few)
    expect(text).toMatch(/^dolphin_drift_reverted\{cluster="0"\} 0$/m);
    expect(text).toMatch(/^dolphin_drift_ood_share\{cluster="0"\} 0$/m);

    // batches until the guard has 8 of each arm: then it reverts
    for (let i = 0; i < 10 && !/dolphin_drift_reverted\{cluster="0"\} 1/.test(text); i++) {
      await Promise.all(Array.from({ length: 10 }, () => chat(p)));
      text = await metrics(p);
    }
    expect(text).toMatch(/^dolphin_drift_reverted\{cluster="0"\} 1$/m);
    expect(text).toMatch(/^dolphin_drift_reverts_total\{cluster="0"\} 1$/m);
    const reverts = lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => /reverted/.test(String(l["msg"])));
    expect(reverts).toHaveLength(1);
    expect(reverts[0]).toMatchObject({ level: "warn", cluster: 0, value: "local", table: { kind: "kmeans" } });

    // from now on the cluster is routed by its rule: remote, every time
    const after = await Promise.all(Array.from({ length: 10 }, () => chat(p)));
    expect(after.map((r) => r.headers.get("x-dolphin-route"))).toEqual(Array(10).fill("remote"));
    text = await metrics(p);
    expect(text).toMatch(/^dolphin_drift_rule_routed_requests\{cause="reverted",cluster="0"\} ([1-9]\d*)$/m);
    expect(text).toMatch(/^dolphin_decisions_total\{path="remote",reason="rule-fallback"\} \d+$/m);
  }, 30_000);

  it("hands the learned clusters to the rule when the mix departs, and shows it in /metrics and the log", async () => {
    const lines: string[] = [];
    const p = await proxyOn(twoClusterTableFile(), { control_share: 0, mix_window: 20, seed: 7 }, "info", lines);
    let text = await metrics(p);
    expect(text).toMatch(/^dolphin_mix_shift Nan$/m); // no full window yet (prom-client writes NaN so)
    expect(text).toMatch(/^dolphin_mix_shift_alarm 0$/m);
    // 19 requests, learned (local); the 20th fills the window: all in cluster 0 against a 50/50 training mix
    const before = await Promise.all(Array.from({ length: 19 }, () => chat(p)));
    expect(before.map((r) => r.headers.get("x-dolphin-route"))).toEqual(Array(19).fill("local"));
    await chat(p);
    text = await metrics(p);
    expect(Number(/^dolphin_mix_shift (.+)$/m.exec(text)?.[1])).toBeGreaterThan(MIX_DEFAULTS.psiAlarm);
    expect(text).toMatch(/^dolphin_mix_shift_alarm 1$/m);
    expect(text).toMatch(/^dolphin_mix_shift_alarms_total 1$/m);
    expect(text).toMatch(/^dolphin_drift_handovers_total\{cluster="0"\} 1$/m);
    expect(text).toMatch(/^dolphin_drift_handed_over\{cluster="0"\} 1$/m);
    // handed over, with no probe share (control_share 0): the rule routes every request
    const after = await Promise.all(Array.from({ length: 5 }, () => chat(p)));
    expect(after.map((r) => r.headers.get("x-dolphin-route"))).toEqual(Array(5).fill("remote"));
    text = await metrics(p);
    expect(text).toMatch(/^dolphin_drift_rule_routed_requests\{cause="handed-over",cluster="0"\} 5$/m);
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged.find((l) => /mix-shift guard/.test(String(l["msg"])))).toMatchObject({
      level: "warn",
      handed_over: [0, 1],
      table: { kind: "kmeans" },
    });
    expect(logged.filter((l) => /handed over to the fallback rule/.test(String(l["msg"])))).toHaveLength(2);
  }, 30_000);

  it("reads the drift section with its defaults and names a bad field", () => {
    const c = parseConfig({ model: MODEL });
    expect(c.drift).toEqual({
      enabled: true,
      control_share: DRIFT_DEFAULTS.controlShare,
      window_s: DRIFT_DEFAULTS.windowS,
      min_samples: DRIFT_DEFAULTS.minSamples,
      z_revert: DRIFT_DEFAULTS.zRevert,
      min_gap: DRIFT_DEFAULTS.minGap,
      revert_after_s: DRIFT_DEFAULTS.revertAfterS,
      reenable_after_s: DRIFT_DEFAULTS.reenableAfterS,
      seed: DRIFT_DEFAULTS.seed,
      mix_enabled: true,
      mix_window: MIX_DEFAULTS.window,
      mix_psi_alarm: MIX_DEFAULTS.psiAlarm,
      mix_psi_clear: MIX_DEFAULTS.psiClear,
    });
    expect(parseConfig({ model: MODEL, drift: { mix_psi_alarm: 0.4 } }).drift.mix_psi_clear).toBe(0.2);
    expect(() => parseConfig({ model: MODEL, drift: { mix_psi_alarm: 0.4, mix_psi_clear: 0.5 } })).toThrow(
      "config: drift.mix_psi_clear: must not exceed drift.mix_psi_alarm (0.4), got 0.5",
    );
    expect(parseConfig({ model: MODEL, drift: { enabled: false } }).drift.enabled).toBe(false);
    expect(() => parseConfig({ model: MODEL, drift: { control_share: 0.9 } })).toThrow(
      "config: drift.control_share: expected a number ≥ 0 and ≤ 0.5, got 0.9",
    );
    expect(() => parseConfig({ model: MODEL, drift: { window: 60 } })).toThrow(/config: drift\.window: unknown key/);
  });
});
