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
  // the gateway: runs dolphin-epp, Envoy with ext_proc, the sidecars and the emulated workers, writing their files
  "^src/gateway/",
  // finds the installed package's root and the files it ships (build/*.wasm, data/)
  "^src/core/package-root\\.ts$",
  // reads and compiles build/core*.wasm, for bindings/node, the servers and the CLI
  "^src/core/core-file\\.ts$",
  // reads a table file from disk, naming it in errors; the rest of src/table/ is the browser-safe format
  "^src/table/table-file\\.ts$",
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
  // the load-sweep study: runs the jobs above on the robustness study's families
  "^src/learn/load-sweep\\.ts$",
  // a job's evaluation routed through the serving drift guard (dolphin eval --drift-guard, the robustness study)
  "^src/learn/served-eval\\.ts$",
  // a study cell's other evaluation arrival sets: drawn as the jobs draw them (workload files by path)
  "^src/learn/eval-sets\\.ts$",
  // `npm start`: runs the jobs and writes tables, evaluation JSON and the report into out/
  "^src/learn/main-job\\.ts$",
  // the learner's worker pool and its worker thread: evaluations and main-job parts on worker_threads
  "^src/learn/pool(-worker)?\\.ts$",
  // writes the report's files (markdown, SVG charts) into a folder; src/report/report.ts builds them and is browser-safe
  "^src/report/report-files\\.ts$",
];

/**
 * The folders of src/ are its layers, bottom to top; each may import only the folders named (and itself). The CLI
 * (src/cli/) and the public entry (src/index.ts) sit above them all. Each folder's README says the same.
 */
const LAYERS = {
  generated: { may: [], why: "constants generated from spec/abi.json" },
  contract: { may: ["generated"], why: "the contract every host shares: the Engine interface, errors, value words" },
  hashing: { may: [], why: "block hashing on the host (xxh64, chained hashes), no dependencies" },
  table: { may: ["contract", "generated", "hashing"], why: "the table format (its checksum is an xxh64)" },
  core: { may: ["contract", "generated", "table"], why: "the WebAssembly boundary and module loading" },
  reference: { may: ["contract", "generated", "hashing", "table"], why: "the plain-TypeScript engine, the oracle" },
  router: {
    may: ["contract", "core", "generated", "hashing", "reference", "table"],
    why: "the Router over either engine, the drift guard, KV events, windows",
  },
  sim: {
    may: ["contract", "generated", "hashing", "router", "table"],
    why: "the simulator routes through a Router; it never imports the learner or the servers",
  },
  report: { may: ["contract", "sim"], why: "reports and charts of evaluations" },
  learn: {
    may: ["contract", "core", "generated", "hashing", "report", "router", "sim", "table"],
    why: "the learner talks to the simulator through its Environment and never imports the servers",
  },
  serve: {
    may: ["contract", "core", "generated", "hashing", "learn", "reference", "router", "sim", "table"],
    why: "the proxy, the emulated worker, real engines; live tuning imports the learner",
  },
  envoy: {
    may: ["contract", "core", "generated", "hashing", "router", "serve", "sim", "table"],
    why: "the Envoy launcher, above the servers whose workers it starts",
  },
  gateway: {
    may: ["contract", "core", "envoy", "serve", "table"],
    why: "the endpoint-picker deployment: dolphin-epp, Envoy with ext_proc, sidecars, above the launchers it uses",
  },
};

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
        "the compiled core takes it from src/core/core-file.ts. Only the CLI may use a binding.",
      severity: "error",
      from: { path: "^src/", pathNot: CLI },
      to: { path: "^bindings/" },
    },
    {
      name: "reference-is-the-oracle",
      comment:
        "src/reference/ is the plain-TypeScript engine the core is tested against, not a library: the host hashes " +
        "with src/hashing/hashes.ts and src/hashing/xxh64.ts. Only the Router (which can run on the reference engine) and the " +
        "public API (src/index.ts) import it; the tests and benchmarks may.",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/reference/", "^src/router/router\\.ts$", "^src/index\\.ts$"] },
      to: { path: "^src/reference/" },
    },
    {
      name: "no-circular",
      comment:
        "No two files import each other, directly or round about: each concern builds on the ones below it. Move " +
        "what both sides need into a file of its own that both import.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    // one rule per folder of src/ (LAYERS above): what it may import, and nothing else in src/
    ...Object.entries(LAYERS).map(([folder, { may, why }]) => ({
      name: `layer-${folder}`,
      comment: `src/${folder}/ may import only ${may.length ? may.map((m) => `src/${m}/`).join(", ") : "nothing in src/"}: ${why}`,
      severity: "error",
      from: { path: `^src/${folder}/` },
      to: { path: "^src/", pathNot: [`^src/${folder}/`, ...may.map((m) => `^src/${m}/`)] },
    })),
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
