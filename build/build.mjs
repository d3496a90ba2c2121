// Builds the project: the constants generated from spec/abi.json, the AssemblyScript core in three flavours, then
// the TypeScript (tsc → dist/).
//   core.wasm              release: -O3, stub runtime, no imports (abort traps; the core validates all input)
//   core.debug.wasm        debug: assertions and bounds checks on, env.abort import for messages (tests)
//   core.incremental.wasm  release with the incremental GC runtime (what the proxy-wasm filter needs)
//   dolphin-epp            the endpoint picker (Go, bindings/go/cmd/dolphin-epp), when Go is installed
//   dolphin-envoy.wasm     the Envoy filter: bindings/envoy/ (proxy-wasm SDK) with the same assembly/ sources, built
//                          with bindings/envoy/asconfig.json (incremental runtime, the WASI shim the SDK's log needs)
//   dist/explorer/         the policy explorer page (npm run build:explorer: Vite, build/explorer.vite.config.mjs)
// Usage: node build/build.mjs [--wasm-only]
import { copyFileSync, existsSync, readFileSync, statSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import asc from "assemblyscript/asc";
import { generate } from "./gen-abi.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const entry = join(root, "assembly/index.ts");
// relative to the root: asc resolves the WASI shim's "lib" (from the extended asconfig) against the working directory
const envoyEntry = "bindings/envoy/index.ts";
// SIMD (fixed-width 128-bit) for the k-means distances: every host runs it (V8, Envoy's V8, wasmtime, wazero)
const SIMD = ["--enable", "simd"];
const targets = [
  { out: "build/core.wasm", args: ["-O3", "--runtime", "stub", "--use", "abort=", "--noAssert", ...SIMD] },
  { out: "build/core.debug.wasm", args: ["--debug", "--runtime", "stub", "--sourceMap", ...SIMD] },
  { out: "build/core.incremental.wasm", args: ["-O3", "--runtime", "incremental", "--use", "abort=", ...SIMD] },
  {
    out: "build/dolphin-envoy.wasm",
    entry: envoyEntry,
    args: ["--config", "bindings/envoy/asconfig.json"],
    extraSources: [join(root, "bindings/envoy")],
  },
];

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

// The contract first: every host's constants come from spec/abi.json (build/gen-abi.mjs).
for (const path of await generate()) console.log(`build: ${path} (from spec/abi.json)`);

const sourcesMtime = Math.max(
  newestMtime(join(root, "assembly")),
  statSync(fileURLToPath(import.meta.url)).mtimeMs,
  statSync(join(root, "build/gen-abi.mjs")).mtimeMs,
  newestMtime(join(root, "build/abi")),
);
process.chdir(root);
for (const t of targets) {
  const out = join(root, t.out);
  const newest = Math.max(sourcesMtime, ...(t.extraSources ?? []).map(newestMtime));
  if (existsSync(out) && statSync(out).mtimeMs > newest) continue;
  const { error, stderr } = await asc.main([t.entry ?? entry, ...t.args, "--outFile", out], {});
  if (error) {
    process.stderr.write(stderr.toString());
    console.error(`build: asc failed for ${t.out}: ${error.message}`);
    process.exit(1);
  }
  console.log(`build: ${t.out} (${statSync(out).size} bytes)`);
}

// The Python and Go bindings ship the release core inside their packages (package data, go:embed): copy it there,
// never by hand, so every host runs the same bytes.
for (const dest of ["bindings/python/dolphin_routing/core.wasm", "bindings/go/core.wasm"]) {
  const src = join(root, "build/core.wasm");
  const out = join(root, dest);
  if (!existsSync(dirname(out))) continue;
  if (existsSync(out) && readFileSync(out).equals(readFileSync(src))) continue;
  copyFileSync(src, out);
  console.log(`build: ${dest} (copy of build/core.wasm)`);
}

// dolphin-epp (bindings/go/cmd/dolphin-epp) embeds the Go binding's copy of the core, so it is built after it, into
// build/dolphin-epp, where dolphin gateway and the tests find it. Without Go (npm run setup says how to install
// it) it is left out, and what needs it says so.
if (!process.argv.includes("--wasm-only")) {
  const epp = join(root, "bindings/go/cmd/dolphin-epp");
  const goVersion = spawnSync("go", ["version"], { encoding: "utf8" });
  if (goVersion.status !== 0) console.log("build: build/dolphin-epp left out (no Go on the PATH: see npm run setup)");
  else {
    const started = Date.now();
    const g = spawnSync("go", ["build", "-trimpath", "-o", join(root, "build/dolphin-epp"), "."], {
      cwd: epp,
      stdio: "inherit",
    });
    if (g.status !== 0) {
      console.error("build: go build of bindings/go/cmd/dolphin-epp failed");
      process.exit(g.status ?? 1);
    }
    const size = (statSync(join(root, "build/dolphin-epp")).size / 2 ** 20).toFixed(1);
    console.log(`build: build/dolphin-epp (${size} MiB, ${((Date.now() - started) / 1000).toFixed(1)} s)`);
  }
}

if (!process.argv.includes("--wasm-only")) {
  const tsc = join(root, "node_modules/typescript/bin/tsc");
  const r = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.json")], { stdio: "inherit" });
  if (r.status !== 0) {
    console.error("build: tsc failed");
    process.exit(r.status ?? 1);
  }
  // The explorer bundles the sources and build/core.wasm, so it is built after both (its browser tests load it).
  const vite = join(root, "node_modules/vite/bin/vite.js");
  if (existsSync(vite)) {
    const e = spawnSync(process.execPath, [vite, "build", "--config", join(root, "build/explorer.vite.config.mjs")], {
      stdio: "inherit",
    });
    if (e.status !== 0) {
      console.error("build: the explorer's vite build failed");
      process.exit(e.status ?? 1);
    }
    console.log("build: dist/explorer/ (the policy explorer)");
  }
}
