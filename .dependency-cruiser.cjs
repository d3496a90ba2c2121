// The layer rules of docs/architecture.md, checked by `npm run lint` (dependency-cruiser), which `npm test` runs
// before the tests. Rules are on resolved file paths, so they hold whatever a relative import looks like, and they
// see static imports, re-exports, require() and import() with a literal specifier.
//
// "Browser-safe" means a page can load the file: it imports no Node built-in (node:fs, fs, node:http, ...) and no
// edge module, so everything it reaches is browser-safe too. Type-only imports vanish when compiled, so the Node
// built-in rules ignore them; the layer rules count them (a type is a dependency on a layer all the same).

/**
 * Files in src/ (below the CLI) that run only under Node, each with the reason. Everything else in src/ is
 * browser-safe. Patterns are regular expressions on the path from the repository root.
 */
const NODE_EDGES = [
  // the servers: HTTP and sockets, the config file, the emulated workers' clock (proxy, worker, emulate, tune, ...)
  "^src/serve/",
  // runs Envoy with the proxy-wasm filter: writes its configuration files, starts and watches the process
  "^src/envoy/",
  // finds the installed package's root and the files it ships (build/*.wasm, data/)
  "^src/package-root\\.ts$",
  // reads and compiles build/core*.wasm, for bindings/node, the servers and the CLI
  "^src/core-file\\.ts$",
  // reads a table file from disk, naming it in errors; src/table.ts is the browser-safe format
  "^src/table-file\\.ts$",
  // reads workload files from disk; their parse* twins in workload.ts are the browser-safe part
  "^src/sim/workload-files\\.ts$",
  // turns command-line choices into a simulation: a workload by name or path, a table file, a cluster file
  "^src/sim/run\\.ts$",
  // the learner's jobs as the CLI runs them: workloads and clusters named by path (through run.ts)
  "^src/learn/job\\.ts$",
  // ablations: run the jobs above
  "^src/learn/ablate\\.ts$",
  // the robustness study: runs the jobs above on workload files shipped in data/
  "^src/learn/robustness\\.ts$",
  // `npm start`: runs the jobs and writes tables, evaluation JSON and the report into out/
  "^src/learn/main-job\\.ts$",
  // the learner's worker pool and its worker thread: evaluations and main-job parts on worker_threads
  "^src/learn/pool(-worker)?\\.ts$",
  // writes the report's files (markdown, SVG charts) into a folder; src/report.ts builds them and is browser-safe
  "^src/report-files\\.ts$",
];

// The command line sits above everything in src/ and may import anything.
const CLI = "^src/cli(\\.ts$|/)";

module.exports = {
  forbidden: [
    {
      name: "node-builtins-only-in-edges",
      comment:
        "Below the CLI, only the named edge modules (NODE_EDGES in .dependency-cruiser.cjs) import Node built-ins: " +
        "the browser loads the rest of src/ (src/sim and src/learn included). Move the Node part into an edge " +
        "module, or name the file there with the reason.",
      severity: "error",
      from: { path: "^src/", pathNot: [CLI, ...NODE_EDGES] },
      to: { dependencyTypes: ["core"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "browser-safe-imports-no-edge",
      comment:
        "A browser-safe file imports no edge module (NODE_EDGES in .dependency-cruiser.cjs): the edge would bring " +
        "its Node built-ins along. Take the browser-safe part out of the edge, or make the importer an edge too.",
      severity: "error",
      from: { path: "^src/", pathNot: [CLI, ...NODE_EDGES] },
      to: { path: NODE_EDGES, dependencyTypesNot: ["type-only"] },
    },
    {
      name: "bindings-browser-no-node-builtins",
      comment: "bindings/browser/ is the browser's entry: no Node built-ins.",
      severity: "error",
      from: { path: "^bindings/browser/" },
      to: { dependencyTypes: ["core"], dependencyTypesNot: ["type-only"] },
    },
    {
      name: "src-not-bindings",
      comment:
        "The runtime entries in bindings/ import src/, never the reverse (src/serve included): a server that needs " +
        "the compiled core takes it from src/core-file.ts. Only the CLI may use a binding.",
      severity: "error",
      from: { path: "^src/", pathNot: CLI },
      to: { path: "^bindings/" },
    },
    {
      name: "reference-is-the-oracle",
      comment:
        "src/reference/ is the plain-TypeScript engine the core is tested against, not a library: the host hashes " +
        "with src/hashes.ts and src/xxh64.ts. Only the Router (which can run on the reference engine) and the " +
        "public API (src/index.ts) import it; the tests and benchmarks may.",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/reference/", "^src/router\\.ts$", "^src/index\\.ts$"] },
      to: { path: "^src/reference/" },
    },
    {
      name: "sim-not-learn-or-serve",
      comment: "The simulator never imports the learner or the servers (the learner talks to it through Environment).",
      severity: "error",
      from: { path: "^src/sim/" },
      to: { path: "^src/(learn|serve)/" },
    },
    {
      name: "learn-not-serve",
      comment: "The learner never imports the servers (live tuning in src/serve imports the learner, not the reverse).",
      severity: "error",
      from: { path: "^src/learn/" },
      to: { path: "^src/serve/" },
    },
    {
      name: "nothing-imports-cli",
      comment: "The CLI is the top layer: nothing in src/ below it, bindings/ or assembly/ imports it.",
      severity: "error",
      from: { path: "^(src|bindings|assembly)/", pathNot: CLI },
      to: { path: CLI },
    },
    {
      name: "src-not-tools",
      comment: "Library code does not import the benchmarks or the tests (the CLI runs the benchmarks).",
      severity: "error",
      from: { path: "^(src|bindings|assembly)/", pathNot: CLI },
      to: { path: "^(bench|test)/" },
    },
    {
      name: "assembly-only-assembly",
      comment: "The core knows nothing of the host: assembly/ imports only assembly/.",
      severity: "error",
      from: { path: "^assembly/" },
      to: { pathNot: "^assembly/" },
    },
  ],
  options: {
    // resolve "./x.js" to x.ts the way tsc does (NodeNext)
    tsConfig: { fileName: "tsconfig.json" },
    // keep type-only imports in the graph, marked "type-only" (the layer rules count them)
    tsPreCompilationDeps: true,
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(dist|build|node_modules)/" },
  },
};
