// `npm test` runs this first: no hand-written file in src/, assembly/, bindings/, bench/ or build/ is over 500 lines
// (tests may be longer), so each stays one concern a reader can hold: a file that grows past it is split by concern,
// not trimmed. Circles between files and between folders are the lint's (`no-circular` and the LAYERS rules in
// .dependency-cruiser.cjs), which `npm test` runs next.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const LIMIT = 500;
const FOLDERS = ["src", "assembly", "bindings", "bench", "build"];
const CODE = /\.(ts|mjs|cjs|js|go|py|c)$/;
const GENERATED = /(^|\/)generated\/|_gen\.go$|\/_abi\.py$|^build\/abi\/|^bindings\/browser\/explorer\/vendor\//;

const git = (...args) => execFileSync("git", args, { cwd: root, encoding: "utf8" }).split("\n").filter(Boolean);
const files = [
  ...new Set([...git("ls-files", ...FOLDERS), ...git("ls-files", "--others", "--exclude-standard", ...FOLDERS)]),
].filter((f) => CODE.test(f) && !GENERATED.test(f));
const problems = [];
for (const f of files) {
  let lines;
  try {
    lines = readFileSync(join(root, f), "utf8").split("\n").length - 1;
  } catch {
    continue; // deleted in the working tree
  }
  if (lines > LIMIT) problems.push(`${f}: ${lines} lines, over ${LIMIT}: split it by concern (one concern per file)`);
}
if (problems.length) {
  console.error(`check-sizes: ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`check-sizes: ${files.length} hand-written files, each within ${LIMIT} lines`);
