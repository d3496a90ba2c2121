// The real-engine suite (test/engines/): vLLM engines started once and shared by its tests, which run one after the
// other, alone (never beside the other test files: each engine takes a core and 3–4.5 GB). `npm test` runs it after
// the main suite.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/engines/**/*.test.ts"],
    fileParallelism: false,
    testTimeout: 180_000,
    hookTimeout: 420_000,
    pool: "forks",
  },
});
