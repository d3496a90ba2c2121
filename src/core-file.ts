// The compiled core as a file of this package (Node only): finds build/core*.wasm beside the installed package and
// compiles it once per flavour. bindings/node registers it for Router.load; the servers and the CLI call it directly,
// so nothing in src/ needs to import a runtime entry from bindings/.
import { readFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The package root: the nearest ancestor holding build/ and a package.json named dolphin-routing. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, "utf8")).name === "dolphin-routing") return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error("dolphin-routing: cannot find the package root from " + fileURLToPath(import.meta.url));
    dir = up;
  }
}

export type CoreFlavour = "release" | "debug" | "incremental";
const FILES: Record<CoreFlavour, string> = { release: "core.wasm", debug: "core.debug.wasm", incremental: "core.incremental.wasm" };
const cache = new Map<CoreFlavour, WebAssembly.Module>();

export function corePath(flavour: CoreFlavour = "release"): string {
  return join(packageRoot(), "build", FILES[flavour]);
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
