// Where the installed package is (Node only): the files it ships (build/*.wasm, data/) are found from here, so they
// resolve the same from the TypeScript sources (tests), from dist/ (the dolphin command) and from node_modules.
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

let root: string | undefined;

/** The package root: the nearest ancestor holding a package.json named dolphin-routing. */
export function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === "dolphin-routing")
      return (root = dir);
    const up = dirname(dir);
    if (up === dir)
      throw new Error("dolphin-routing: cannot find the package root from " + fileURLToPath(import.meta.url));
    dir = up;
  }
}

/** A file shipped with the package, e.g. packageFile("build", "core.wasm"). */
export function packageFile(...parts: string[]): string {
  return join(packageRoot(), ...parts);
}
