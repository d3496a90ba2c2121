// `npm run build:explorer`: the policy explorer (bindings/browser/explorer/) bundled by Vite into dist/explorer/, a
// static folder that works from any static host and offline: every script, style, the worker and core.wasm are
// files in it (no CDN), referenced by relative paths so it can be served from any sub-path.
import { fileURLToPath } from "node:url";
import { createLogger, defineConfig } from "vite";

const root = fileURLToPath(new URL("../bindings/browser/explorer/", import.meta.url));

// bindings/browser/index.ts names build/core.wasm relative to its own compiled file (dist/), which Vite cannot find
// from the sources; the explorer's worker sets the bundled core's URL itself (setCoreUrl), so that warning is noise.
const logger = createLogger("warn");
const isCoreUrlWarning = (msg) => msg.includes(`build/core.wasm", import.meta.url) doesn't exist at build time`);
for (const level of ["warn", "warnOnce"]) {
  const log = logger[level];
  logger[level] = (msg, options) => void (isCoreUrlWarning(msg) || log(msg, options));
}

export default defineConfig({
  customLogger: logger,
  root,
  base: "./",
  logLevel: "warn",
  publicDir: false,
  build: {
    outDir: fileURLToPath(new URL("../dist/explorer/", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    assetsInlineLimit: 0, // core.wasm stays a file, fetched and compiled by the browser binding
    chunkSizeWarningLimit: 1024,
  },
  worker: { format: "es" },
});
