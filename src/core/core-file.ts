// The compiled core as a file of this package (Node only): finds build/core*.wasm beside the installed package and
// compiles it once per flavour. bindings/node registers it for Router.load; the servers and the CLI call it directly,
// so nothing in src/ needs to import a runtime entry from bindings/.
import { existsSync, readFileSync } from "node:fs";
import { packageFile } from "./package-root.js";

export type CoreFlavour = "release" | "debug" | "incremental";
const FILES: Record<CoreFlavour, string> = {
  release: "core.wasm",
  debug: "core.debug.wasm",
  incremental: "core.incremental.wasm",
};
const cache = new Map<CoreFlavour, WebAssembly.Module>();

export function corePath(flavour: CoreFlavour = "release"): string {
  return packageFile("build", FILES[flavour]);
}

/** The compiled core (cached). Run `npm run build` first if build/ is empty. */
export function loadCoreModule(flavour: CoreFlavour = "release"): WebAssembly.Module {
  let m = cache.get(flavour);
  if (!m) {
    const path = corePath(flavour);
    if (!existsSync(path)) throw new Error(`dolphin-routing: ${path} is missing: run \`npm run build\``);
    m = new WebAssembly.Module(readFileSync(path));
    cache.set(flavour, m);
  }
  return m;
}
