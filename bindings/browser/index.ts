// Browser entry: fetches the core next to the package's build/ (or a URL the page gives) and registers it as
// the default module for Router.load. compileStreaming needs the server to send application/wasm.
import { setDefaultModuleProvider } from "../../src/router/router.js";

let coreUrl: string | URL = new URL("../../../build/core.wasm", import.meta.url);
let compiled: Promise<WebAssembly.Module> | null = null;

/** Where to fetch the core from (call before the first Router.load). */
export function setCoreUrl(url: string | URL): void {
  coreUrl = url;
  compiled = null;
}

export function loadCoreModule(): Promise<WebAssembly.Module> {
  compiled ??= WebAssembly.compileStreaming(fetch(coreUrl));
  return compiled;
}

setDefaultModuleProvider(loadCoreModule);

export * from "../../src/index.js";
