// The policy explorer in a real browser: Debian's chromium (npm run setup installs it) driven by playwright-core,
// against the built page (dist/explorer/, npm run build:explorer) served by `dolphin explore`'s server on
// localhost. The page loads without a console error and makes no request beyond the local server; Run shows a
// comparison of every baseline with the CLI's figures (dolphin eval --json); a corrupted table shows the core's
// field-naming error, the one the CLI prints; a dropped trace is simulated; a table trains and downloads; the explain
// view's decision equals router.explain in Node; a guarded table's cluster map shows its guards; the load sweep gives
// Node's attainment; a long job shows progress, leaves the page responsive and can be cancelled; custom SLO and model
// values are checked with messages naming the field; the keyboard reaches every control; the first load is ≤ 1 MB.
// Screenshots of each view go to test-output/explorer/ for a reviewer.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pack, unpack } from "msgpackr";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadCoreModule, Router } from "../bindings/node/index.js";
import { BASELINES, evaluate, sweep } from "../bindings/browser/explorer/jobs.js";
import { explorerDir, serveExplorer } from "../src/cli/explore.js";
import { evalJob } from "../src/learn/job.js";
import { decodeTable, encodeTable } from "../src/table/codec.js";
import { ruleTable } from "../src/table/rule-table.js";
import { TableError } from "../src/table/table.js";
import { kmeansTable } from "./helpers.js";

const CHROMIUM = "/usr/bin/chromium";
// The flags known to work on this kind of machine: no sandbox as root, and no background connections (the network
// is closed, and a refused connection would show up as noise or a console error).
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
const SHOTS = "test-output/explorer";

let server: Server;
let url: string;
let browser: BrowserContext;
let profile: string;

beforeAll(async () => {
  ({ server, url } = await serveExplorer(explorerDir(), 0));
  profile = mkdtempSync(join(tmpdir(), "dolphin-explorer-chromium-"));
  // a fresh, empty profile (--user-data-dir): playwright takes it as the persistent context's folder
  browser = await chromium
    .launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      args: FLAGS,
      viewport: { width: 1200, height: 1000 },
    })
    .catch((e: Error) => {
      throw new Error(`cannot start ${CHROMIUM} (npm run setup installs it with apt-get): ${e.message}`);
    });
  mkdirSync(SHOTS, { recursive: true });
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  if (profile) rmSync(profile, { recursive: true, force: true });
});

/** A fresh page that records console errors, page errors and every request that leaves the local server. */
async function openExplorer(): Promise<{ page: Page; errors: string[]; foreign: string[] }> {
  const page = await browser.newPage();
  const errors: string[] = [];
  const foreign: string[] = [];
  page.on("console", (m) => void (m.type() === "error" && errors.push(m.text())));
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("request", (r) => void (!r.url().startsWith(url) && !/^(blob|data):/.test(r.url()) && foreign.push(r.url())));
  await page.goto(url);
  return { page, errors, foreign };
}

describe("the policy explorer in Chromium", () => {
  it("opens, and Run with the defaults shows every baseline side by side, labelled simulated", async () => {
    const { page, errors, foreign } = await openExplorer();
    await expect(page.title()).resolves.toMatch(/simulated/);
    // the explain view's first answer: its worker and the core are loaded
    await page.waitForFunction(() => (document.getElementById("explain-decision")?.textContent ?? "") !== "");
    await page.screenshot({ path: `${SHOTS}/1-opened.png`, fullPage: true });
    const t0 = Date.now();
    await page.getByRole("button", { name: "Run" }).click();
    await page.locator("#comparison tbody tr").first().waitFor({ timeout: 90_000 });
    const ms = Date.now() - t0;
    const policies = await page.locator("#comparison tbody th[scope=row]").allTextContents();
    expect(policies.sort()).toEqual([
      "always-local",
      "always-remote",
      "dynamo-isl",
      "dynamo-isl-or-load",
      "dynamo-legacy",
      "dynamo-load",
      "llm-d",
      "ppd",
      "trtllm",
    ]);
    const header = await page.locator("#comparison thead").textContent();
    for (const col of [
      "SLO attainment",
      "TTFT P50",
      "TTFT P90",
      "TTFT P99",
      "TPOT P50",
      "TPOT P90",
      "TPOT P99",
      "local share",
      "throughput",
      "KV moved",
    ])
      expect(header).toContain(col);
    await expect(page.locator("#comparison caption").textContent()).resolves.toContain("simulated");
    await expect(page.locator("#cmp-meta").textContent()).resolves.toMatch(/^Simulated: hybrid/);
    expect(await page.locator("#charts canvas").count()).toBeGreaterThanOrEqual(3);
    // the same figures as `dolphin eval --json` for the page's defaults (columns: attainment, TTFT P50/P90/P99, TPOT P50/P90/P99)
    const cli = evalJob({
      workload: "hybrid",
      split: "3P1D",
      slo: "default",
      seed: 1,
      requests: 400,
      module: loadCoreModule(),
      policies: [...BASELINES],
    });
    for (const [name, p] of Object.entries(cli.policies)) {
      const cells = await page.locator(`#comparison tbody tr[data-policy="${name}"] td`).allTextContents();
      const ms = (x: number) => x.toFixed(x < 100 ? 1 : 0);
      expect([cells[0], cells[2], cells[5]], name).toEqual([
        `${(100 * p.slo_attainment).toFixed(1)}%`,
        ms(p.ttft_ms.p90),
        ms(p.tpot_ms.p90),
      ]);
    }
    await page.screenshot({ path: `${SHOTS}/2-comparison.png`, fullPage: true });
    await page.locator("section[aria-labelledby=cmp-h]").screenshot({ path: `${SHOTS}/2-comparison-section.png` });
    console.log(`explorer: default Run in Chromium took ${ms} ms`);
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.close();
  }, 120_000);

  // Speed is a benchmark's matter, not a test's (the machine is shared): this test checks that a full-size run in the
  // page gives Node's figures, and reports both times.
  it("simulates the hybrid workload (2,000 requests, 3P1D) in the page with the same figures as in Node", async () => {
    const setup = { split: "3P1D", slo: "default", load: "trace", seed: 1, requests: 2000 };
    const { page, errors } = await openExplorer();
    await page.locator("#requests").fill(String(setup.requests));
    await page.locator("#load").fill(setup.load);
    await page.getByRole("button", { name: "Run" }).click();
    const row = page.locator(`#comparison tbody tr[data-policy="dynamo-isl"]`);
    await row.waitFor({ timeout: 120_000 });
    const pageMs = Number(await row.getAttribute("data-simulate-ms"));
    const cells = await row.locator("td").allTextContents();
    const module = loadCoreModule();
    const job = { ...setup, workload: { generator: "hybrid" }, policies: ["dynamo-isl"] as const };
    const node = evaluate({ ...job, policies: [...job.policies] }, module);
    const p = node.output.policies["dynamo-isl"]!;
    const ms = (x: number) => x.toFixed(x < 100 ? 1 : 0);
    expect([cells[0], cells[2], cells[5]]).toEqual([
      `${(100 * p.slo_attainment).toFixed(1)}%`,
      ms(p.ttft_ms.p90),
      ms(p.tpot_ms.p90),
    ]);
    const nodeMs = node.simulateMs["dynamo-isl"]!;
    console.log(
      `explorer: one simulation of hybrid, 2000 requests, 3P1D (dynamo-isl): page ${pageMs.toFixed(0)} ms, Node ${nodeMs.toFixed(0)} ms (${(pageMs / nodeMs).toFixed(2)}x)`,
    );
    expect(pageMs).toBeGreaterThan(0);
    expect(errors).toEqual([]);
    await page.close();
  }, 180_000);

  it("keyboard alone reaches every control, in the order they are shown, and can start and cancel a job", async () => {
    const { page, errors } = await openExplorer();
    const focused = () => page.evaluate(() => document.activeElement?.id ?? "");
    const reached: string[] = [];
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press("Tab");
      reached.push(await focused());
    }
    const controls = [
      "cluster",
      "link",
      "split",
      "slo",
      "slo-ttft",
      "slo-tpot",
      "load",
      "workload",
      "requests",
      "seed",
      "custom-model-summary",
      "drop",
      "file",
      "run",
      "sweep",
      "train",
      "reward",
      "explain-table",
      "x-prompt-range",
      "x-prompt",
      "x-cached-p-range",
      "x-cached-p",
      "x-cached-d-range",
      "x-cached-d",
      "x-osl-range",
      "x-osl",
    ];
    expect([...new Set(reached)].filter((id) => id !== "")).toEqual(controls); // Tab wraps round: first visits
    // the custom model's cluster file opens from the keyboard and is reached next
    await page.focus("#custom-model-summary");
    await page.keyboard.press("Enter");
    await page.keyboard.press("Tab");
    expect(await focused()).toBe("cluster-file");
    // a slider moves with the arrow keys, and the explain view follows
    await page.focus("#x-prompt-range");
    await page.keyboard.press("ArrowRight");
    await expect(page.locator("#x-prompt").inputValue()).resolves.toBe("4112");
    await page.waitForFunction(() =>
      (document.getElementById("explain-decision")?.dataset["inputs"] ?? "").includes('"promptTokens":4112'),
    );
    // a job starts from the keyboard, and Cancel (enabled while it runs) is reached and pressed from it
    await page.focus("#requests");
    await page.keyboard.press("Control+A");
    await page.keyboard.type("400");
    await page.focus("#load");
    await page.keyboard.press("Control+A");
    await page.keyboard.type("x1");
    await page.focus("#sweep");
    await page.keyboard.press("Enter");
    await expect(page.locator("#cancel").isEnabled()).resolves.toBe(true);
    await page.focus("#reward");
    await page.keyboard.press("Tab");
    expect(await focused()).toBe("cancel");
    await page.keyboard.press("Enter");
    await expect(page.locator("#status").textContent()).resolves.toBe("Cancelled.");
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it("a corrupted table shows the core's field-naming message, the same as the CLI's", async () => {
    const { page, errors, foreign } = await openExplorer();
    // a valid file with one field's type changed: decodeTable (what `dolphin table` runs) names the field
    const good = encodeTable(ruleTable("dynamo-isl"));
    const bad = corrupt(good);
    let cliMessage = "";
    try {
      decodeTable(bad);
    } catch (e) {
      if (!(e instanceof TableError)) throw e;
      cliMessage = e.message;
    }
    expect(cliMessage).not.toBe("");
    const dir = mkdtempSync(join(tmpdir(), "dolphin-explorer-table-"));
    const file = join(dir, "corrupted.msgpack");
    writeFileSync(file, bad);
    await page.locator("#file").setInputFiles(file);
    await page.waitForFunction(() => (document.getElementById("table-error")?.textContent ?? "") !== "", undefined, {
      timeout: 20_000,
    });
    expect(await page.locator("#table-error").textContent()).toBe(cliMessage);
    await page.screenshot({ path: `${SHOTS}/3-corrupted-table.png`, fullPage: true });
    // and a good table is shown
    writeFileSync(file, good);
    await page.locator("#file").setInputFiles(file);
    await page.waitForFunction(
      () => (document.getElementById("table-info")?.textContent ?? "").includes("dynamo-isl"),
      undefined,
      { timeout: 20_000 },
    );
    await expect(page.locator("#table-error").textContent()).resolves.toBe("");
    rmSync(dir, { recursive: true, force: true });
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.close();
  }, 60_000);

  it("a dropped Mooncake file is parsed in the page and simulated", async () => {
    const { page, errors, foreign } = await openExplorer();
    await page.locator("#file").setInputFiles("data/traces/mooncake_conversation_dev.jsonl");
    await page.waitForFunction(
      () => (document.getElementById("workload") as HTMLSelectElement).value === "file",
      undefined,
      { timeout: 10_000 },
    );
    await page.locator("#requests").fill("200");
    await page.locator("#load").fill("trace");
    await page.getByRole("button", { name: "Run" }).click();
    await page.locator("#comparison tbody tr").first().waitFor({ timeout: 60_000 });
    await expect(page.locator("#cmp-meta").textContent()).resolves.toContain("mooncake_conversation_dev (second half)");
    await page.screenshot({ path: `${SHOTS}/4-mooncake-file.png`, fullPage: true });
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.close();
  }, 90_000);

  it("trains a table with live progress, and the downloaded file validates in Node", async () => {
    const { page, errors, foreign } = await openExplorer();
    await page.locator("#requests").fill("150");
    await page.locator("#load").fill("x1");
    await page.getByRole("button", { name: "Train a table" }).click();
    await page.waitForFunction(
      () => /^round \d+/.test(document.getElementById("train-status")?.textContent ?? ""),
      undefined,
      { timeout: 60_000 },
    );
    const link = page.getByRole("link", { name: "Download table.msgpack" });
    await link.waitFor({ timeout: 90_000 });
    await page.screenshot({ path: `${SHOTS}/5-trained.png`, fullPage: true });
    await page.locator("section[aria-labelledby=train-h]").screenshot({ path: `${SHOTS}/5-training-section.png` });
    await page.locator("section[aria-labelledby=table-h]").screenshot({ path: `${SHOTS}/5-trained-table-section.png` });
    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    const path = await download.path();
    const table = decodeTable(new Uint8Array(readFileSync(path)));
    expect(table.kind).toBe("kmeans");
    expect(await page.locator("#cluster-map canvas").count()).toBeGreaterThan(0); // the trained table's cluster map
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.close();
  }, 150_000);

  it("the explain view's decision equals router.explain in Node, and a guarded table's cluster map shows its guards", async () => {
    const { page, errors, foreign } = await openExplorer();
    const bytes = encodeTable(GUARDED);
    const dir = mkdtempSync(join(tmpdir(), "dolphin-explorer-guarded-"));
    const file = join(dir, "guarded.msgpack");
    writeFileSync(file, bytes);
    await page.locator("#file").setInputFiles(file);
    await page.waitForFunction(() =>
      (document.getElementById("explain-decision")?.textContent ?? "").includes("(kmeans table)"),
    );
    expect(await page.locator("#explain-table").inputValue()).toBe("opened");
    const node = Router.create(bytes, {
      module: loadCoreModule(),
      workers: [
        { id: "P", role: "prefill" },
        { id: "D", role: "decode" },
      ],
    });
    const prompt = (n: number) => Array.from({ length: n }, (_, i) => (i * 31 + 7) % 32_000);
    const cases = [
      { promptTokens: 2000, cachedP: 0, cachedD: 0, oslHat: 500 },
      { promptTokens: 40, cachedP: 0, cachedD: 0, oslHat: 40 },
      { promptTokens: 9000, cachedP: 4000, cachedD: 6500, oslHat: 120 },
      { promptTokens: 30_000, cachedP: 29_000, cachedD: 100, oslHat: 3000 },
      { promptTokens: 2980, cachedP: 0, cachedD: 0, oslHat: 2980 }, // log1p ≈ 8: z = 0.5, on centroid 1
    ];
    const reasons = new Set<string>();
    for (const x of cases) {
      for (const [id, v] of [
        ["x-prompt", x.promptTokens],
        ["x-cached-p", x.cachedP],
        ["x-cached-d", x.cachedD],
        ["x-osl", x.oslHat],
      ] as const)
        await page.locator(`#${id}`).fill(String(v));
      await page.waitForFunction(
        (want) => document.getElementById("explain-decision")?.dataset["inputs"] === want,
        JSON.stringify(x),
      );
      const shown = page.locator("#explain-decision");
      node.index.clear();
      const tokens = prompt(x.promptTokens);
      node.index.store("P", node.hash({ tokens: tokens.slice(0, x.cachedP) }));
      node.index.store("D", node.hash({ tokens: tokens.slice(0, x.cachedD) }));
      const e = node.explain({ tokens, oslHat: x.oslHat });
      expect(await shown.getAttribute("data-bit"), JSON.stringify(x)).toBe(String(e.decision.bit));
      expect(await shown.getAttribute("data-reason")).toBe(e.decision.reason);
      expect(await shown.getAttribute("data-cluster")).toBe(String(e.decision.cluster));
      expect(await page.locator("#explain-why").textContent()).toBe(`Why: ${e.why}`);
      const values = await page.locator("#explain-features tbody td:nth-child(2)").allTextContents();
      const f = e.decision.features;
      expect(values).toEqual([f.isl, f.effP, f.effD, f.oslHat].map(String));
      const z = await page.locator("#explain-features tbody td:nth-child(3)").allTextContents();
      expect(z).toEqual(e.standardized.map((v) => v.toFixed(4)));
      const scores = await page.locator("#explain-clusters tbody td:nth-child(3)").allTextContents();
      expect(scores).toEqual(e.scores.map((v) => v.toFixed(4)));
      reasons.add(e.decision.reason);
    }
    expect([...reasons].sort()).toEqual(["cluster", "out-of-distribution", "rule-fallback"]); // every kind of answer
    await page.locator("section[aria-labelledby=explain-h]").screenshot({ path: `${SHOTS}/6-explain.png` });
    // the cluster map: centroids only until a Run routes requests with the table
    await expect(page.locator("#map-source").textContent()).resolves.toMatch(/^Centroids only/);
    await page.locator("#requests").fill("150");
    await page.locator("#load").fill("trace");
    await page.getByRole("button", { name: "Run" }).click();
    await page.waitForFunction(
      () => (document.getElementById("map-source")?.textContent ?? "").startsWith("Points:"),
      undefined,
      {
        timeout: 90_000,
      },
    );
    await expect(page.locator("#clusters tbody tr").count()).resolves.toBe(4);
    const guards = (await page.locator("#guards").textContent()) ?? "";
    expect(guards).toMatch(
      /^Guards \(table version 2\): fallback rule dynamo-isl .*out-of-distribution bounds per cluster\. Of 150 requests, /,
    );
    expect(await page.locator("#cluster-map canvas").count()).toBeGreaterThan(0);
    await page.locator("section[aria-labelledby=table-h]").screenshot({ path: `${SHOTS}/7-cluster-map.png` });
    rmSync(dir, { recursive: true, force: true });
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.close();
  }, 150_000);

  it("sweeps the load: every policy's attainment at five loads, Node's figures", async () => {
    const { page, errors } = await openExplorer();
    const setup = { split: "3P1D", slo: "default", load: "x1", seed: 1, requests: 40 };
    await page.locator("#requests").fill(String(setup.requests));
    await page.locator("#load").fill(setup.load);
    await page.getByRole("button", { name: "Sweep load" }).click();
    await page.locator("#sweep-table tbody tr").first().waitFor({ timeout: 120_000 });
    await expect(page.locator("#sweep-table tbody tr").count()).resolves.toBe(BASELINES.length);
    const node = sweep({ ...setup, workload: { generator: "hybrid" }, policies: ["dynamo-isl"] }, loadCoreModule());
    const cells = await page.locator(`#sweep-table tbody tr[data-policy="dynamo-isl"] td`).allTextContents();
    expect(cells).toEqual(node.attainment["dynamo-isl"]!.map((a) => `${(100 * a).toFixed(1)}%`));
    expect(await page.locator("#sweep-chart canvas").count()).toBeGreaterThan(0);
    await page.locator("section[aria-labelledby=sweep-h]").screenshot({ path: `${SHOTS}/8-sweep.png` });
    expect(errors).toEqual([]);
    await page.close();
  }, 150_000);

  it("a long job shows progress, the page stays responsive, and Cancel stops it", async () => {
    const { page, errors } = await openExplorer();
    await page.locator("#requests").fill("2000");
    await page.locator("#load").fill("x1");
    await page.getByRole("button", { name: "Sweep load" }).click();
    const bar = page.locator("#progress");
    await bar.waitFor({ state: "visible" });
    await page.waitForFunction(
      () => (document.getElementById("progress") as HTMLProgressElement).value > 0,
      undefined,
      {
        timeout: 90_000,
      },
    );
    await expect(page.locator("#status").textContent()).resolves.toMatch(/^load \d of 5 /);
    // responsive: the page answers at once, and the explain view answers while the simulation runs
    const t0 = Date.now();
    await page.locator("#x-prompt").fill("12345");
    await page.waitForFunction(() =>
      (document.getElementById("explain-decision")?.dataset["inputs"] ?? "").includes('"promptTokens":12345'),
    );
    const answerMs = Date.now() - t0;
    expect(await page.locator("#cancel").isEnabled()).toBe(true);
    await page.screenshot({ path: `${SHOTS}/9-running.png`, fullPage: true });
    await page.getByRole("button", { name: "Cancel" }).click();
    await expect(page.locator("#status").textContent()).resolves.toBe("Cancelled.");
    expect(await bar.isHidden()).toBe(true);
    expect(await page.getByRole("button", { name: "Run" }).isEnabled()).toBe(true);
    console.log(`explorer: the explain view answered in ${answerMs} ms while a sweep ran`);
    // a fresh worker takes the next job
    await page.locator("#requests").fill("30");
    await page.locator("#load").fill("trace");
    await page.getByRole("button", { name: "Run" }).click();
    await page.locator("#comparison tbody tr").first().waitFor({ timeout: 60_000 });
    expect(errors).toEqual([]);
    await page.close();
  }, 150_000);

  it("checks a custom SLO and a custom model with messages naming the field, and simulates them", async () => {
    const { page, errors } = await openExplorer();
    await page.locator("#requests").fill("40");
    await page.locator("#load").fill("trace");
    await page.locator("#slo-ttft").fill("0");
    expect(await page.locator("#slo").inputValue()).toBe("custom");
    await page.getByRole("button", { name: "Run" }).click();
    await expect(page.locator("#setup-error").textContent()).resolves.toBe(
      'SLO TTFT: expected a number of milliseconds > 0, got "0"',
    );
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("slo-ttft");
    await page.locator("#slo-ttft").fill("5000");
    await page.locator("#slo-tpot").fill("80");
    await page.locator("#cluster").selectOption("custom");
    expect(await page.locator("#custom-model").getAttribute("open")).not.toBeNull();
    const bad = JSON.stringify({ presets: { "my-model": { base: "h100-70b", tp: 0 } } });
    await page.locator("#cluster-file").fill(bad);
    const message = "custom model: presets.my-model.tp: expected an integer ≥ 1, got 0";
    await expect(page.locator("#cluster-check").textContent()).resolves.toBe(message);
    await page.getByRole("button", { name: "Run" }).click();
    await expect(page.locator("#setup-error").textContent()).resolves.toBe(message);
    await page.screenshot({ path: `${SHOTS}/10-custom-model-error.png`, fullPage: true });
    await page.locator("section[aria-labelledby=setup-h]").screenshot({ path: `${SHOTS}/10-setup-section.png` });
    const good = JSON.stringify({ presets: { "my-model": { base: "h100-70b", tp: 8 } } });
    await page.locator("#cluster-file").fill(good);
    await expect(page.locator("#cluster-check").textContent()).resolves.toBe(
      'Custom model preset "my-model" is valid.',
    );
    await page.getByRole("button", { name: "Run" }).click();
    await page.locator("#comparison tbody tr").first().waitFor({ timeout: 60_000 });
    await expect(page.locator("#cmp-meta").textContent()).resolves.toMatch(/ on my-model 3P1D, .*SLO 5000\/80 ms/);
    const node = evaluate(
      {
        workload: { generator: "hybrid" },
        clusterFile: { name: "custom model", text: good },
        split: "3P1D",
        slo: "5000,80",
        load: "trace",
        seed: 1,
        requests: 40,
        policies: ["dynamo-isl"],
      },
      loadCoreModule(),
    );
    const cells = await page.locator(`#comparison tbody tr[data-policy="dynamo-isl"] td`).allTextContents();
    const p = node.output.policies["dynamo-isl"]!;
    expect([cells[0], cells[2]]).toEqual([`${(100 * p.slo_attainment).toFixed(1)}%`, ms(p.ttft_ms.p90)]);
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);

  it("loads at most 1 MB on first load (everything the built page can fetch)", async () => {
    const { page } = await openExplorer();
    await page.waitForFunction(() => (document.getElementById("explain-decision")?.textContent ?? "") !== "");
    const sizes = await page.evaluate(() =>
      performance.getEntriesByType("resource").map((e) => (e as PerformanceResourceTiming).encodedBodySize),
    );
    await page.close();
    // the whole built folder bounds what any first load can transfer (the page, its workers, the core)
    const dir = explorerDir();
    const files = (d: string): string[] =>
      readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? files(join(d, f)) : [join(d, f)]));
    const built = files(dir).reduce((s, f) => s + statSync(f).size, 0);
    const fetched = sizes.reduce((a, b) => a + b, 0);
    console.log(
      `explorer: first load: the page fetched ${sizes.length} resources, ${(fetched / 1024).toFixed(0)} KB (its workers fetch the core); the built folder is ${(built / 1024).toFixed(0)} KB`,
    );
    expect(fetched).toBeGreaterThan(0);
    expect(built).toBeLessThanOrEqual(1024 * 1024);
  });
});

const ms = (x: number) => x.toFixed(x < 100 ? 1 : 0);

/** A guarded (version 2) table whose clusters answer in every way: by their bit, by the fallback rule (cluster 2),
 *  and as out of distribution (tight bounds on clusters 0, 1 and 3). */
const GUARDED = kmeansTable(
  [
    [-1, -1, -1, -1],
    [0.5, 0.5, 0.5, 0.5],
    [0.8, 0.8, 0.8, -0.5],
    [2, 2, 2, 2],
  ],
  [0, 1, 2, 1],
  { version: 2, ood_bound: [1, 0.3, 100, 0.5] },
);

/** The table's bytes with one field's value of the wrong type: kind (a string) becomes the number 7. */
function corrupt(bytes: Uint8Array): Uint8Array {
  const obj = unpack(bytes) as Record<string, unknown>;
  return new Uint8Array(pack({ ...obj, kind: 7 }));
}
