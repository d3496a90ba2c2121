// `npm run setup`'s peers step (build/peers-setup.mjs) without the toolchains it needs: it fails saying how to
// install them, and --check says to run npm run setup, each without touching the real cache.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");
const cache = mkdtempSync(join(tmpdir(), "dolphin-peers-setup-"));
// a folder with node alone: node's own folder may hold cargo or go too (Debian puts all three in /usr/bin)
const nodeOnly = join(cache, "bin");
mkdirSync(nodeOnly);
symlinkSync(process.execPath, join(nodeOnly, "node"));
afterAll(() => rmSync(cache, { recursive: true, force: true }));

/** peersStep in a fresh Node with an empty cache and only node and `path` on PATH. */
function step(checkOnly: boolean, path: string[] = []): { code: number | null; err: string } {
  const script = `import(${JSON.stringify(join(ROOT, "build/peers-setup.mjs"))})
    .then((m) => m.peersStep({ checkOnly: ${checkOnly}, log: () => {} }))
    .then(() => process.exit(0), (e) => { console.error(e.message); process.exit(3); })`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    env: { PATH: [nodeOnly, ...path].join(":"), DOLPHIN_CACHE: cache, HOME: homedir() },
  });
  return { code: r.status, err: r.stderr };
}

/** A folder holding this machine's cargo alone (for the go check). */
function cargoOnly(): string {
  const dir = join(cache, "cargo-bin");
  mkdirSync(dir, { recursive: true });
  const cargo = spawnSync("sh", ["-c", "command -v cargo"], { encoding: "utf8" }).stdout.trim();
  if (cargo) symlinkSync(cargo, join(dir, "cargo"));
  return dir;
}

describe("the peers' harnesses set-up", () => {
  it("fails without cargo, saying how to install Rust", () => {
    const r = step(false);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/peers: cargo is needed to build the peers' harnesses: install Rust \(https:\/\/rustup\.rs/);
  });

  it("fails without go, saying how to install Go", () => {
    const r = step(false, [cargoOnly()]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/peers: go is needed to build the peers' harnesses: install Go 1\.25 or newer/);
  });

  it("--check reports the harnesses missing and says to run npm run setup", () => {
    const r = step(true);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/peers: harnesses not built in .*: run npm run setup/);
  });
});
