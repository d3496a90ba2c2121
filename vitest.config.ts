import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // real vLLM engines: their own run, alone, after this one (vitest.engines.config.ts)
    exclude: ["test/engines/**", "**/node_modules/**"],
    testTimeout: 60_000,
    pool: "forks",
  },
});
