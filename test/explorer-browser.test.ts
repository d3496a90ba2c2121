// The policy explorer in a real browser: Debian's chromium (npm run setup installs it) driven by playwright-core,
// against the built page (dist/explorer/, npm run build:explorer) served by `dolphin explore`'s server on
// localhost. The page loads without a console error and makes no request beyond the local server; Run shows a
// comparison of every baseline with the CLI's figures (dolphin eval --json); a corrupted table shows the core's
// field-naming error, the one the CLI prints; a dropped trace is simulated; a table trains and downloads; the
// keyboard reaches every control. Screenshots of each view go to test-output/explorer/ for a reviewer.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pack, unpack } from "msgpackr";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadCoreModule } from "../bindings/node/index.js";
import { BASELINES, evaluate } from "../bindings/browser/explorer/jobs.js";
import { explorerDir, serveExplorer } from "../src/cli/explore.js";
import { evalJob } from "../src/learn/job.js";
import { decodeTable, encodeTable, ruleTable, TableError } from "../src/table.js";

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

  it("keyboard alone reaches every control, in the order they are shown", async () => {
    const { page, errors } = await openExplorer();
    const reached: string[] = [];
    for (let i = 0; i < 16; i++) {
      await page.keyboard.press("Tab");
      reached.push(await page.evaluate(() => document.activeElement?.id ?? ""));
    }
    const controls = [
      "cluster",
      "split",
      "slo",
      "load",
      "workload",
      "requests",
      "seed",
      "drop",
      "file",
      "run",
      "train",
    ];
    expect([...new Set(reached)].filter((id) => controls.includes(id))).toEqual(controls); // Tab wraps round: first visits
    expect(errors).toEqual([]);
    await page.close();
  });

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
    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    const path = await download.path();
    const table = decodeTable(new Uint8Array(readFileSync(path)));
    expect(table.kind).toBe("kmeans");
    expect(await page.locator("#cluster-map canvas").count()).toBeGreaterThan(0); // the trained table's cluster map
    expect(errors).toEqual([]);
    expect(foreign).toEqual([]);
    await page.close();
  }, 150_000);
});

/** The table's bytes with one field's value of the wrong type: kind (a string) becomes the number 7. */
function corrupt(bytes: Uint8Array): Uint8Array {
  const obj = unpack(bytes) as Record<string, unknown>;
  return new Uint8Array(pack({ ...obj, kind: 7 }));
}
