// Node entry: registers the core compiled from build/core.wasm beside the installed package (src/core/core-file.ts) as
// the default module for Router.load. Everything else is the shared API.
import { loadCoreModule } from "../../src/core/core-file.js";
import { setDefaultModuleProvider } from "../../src/router/router.js";

export { corePath, loadCoreModule, type CoreFlavour } from "../../src/core/core-file.js";

setDefaultModuleProvider(async () => loadCoreModule());

export * from "../../src/index.js";
