#!/usr/bin/env node
// The `dolphin` command. The TypeScript is compiled to dist/ by `npm run build` (run by npm ci and npm test).
import { existsSync } from "node:fs";
const cli = new URL("../dist/src/cli/index.js", import.meta.url);
if (!existsSync(cli)) {
  console.error("dolphin: dist/ is missing; run `npm run build` first");
  process.exit(1);
}
const { main } = await import(cli.href);
process.exitCode = await main(process.argv.slice(2));
