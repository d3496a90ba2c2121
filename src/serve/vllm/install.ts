// Where `npm run setup` put vLLM (build/vllm-setup.mjs): a venv and the tiny model in a per-user cache outside the
// clone, named by the installed.json it writes last. Read here, never installed here: nothing is downloaded at run
// time, and a missing install says how to make it.

import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export interface VllmInstall {
  /** The cache folder (logs and the compile cache of the engines go under it). */
  home: string;
  python: string;
  vllm: string;
  /** The tiny model's folder (config.json, safetensors, tokenizer). */
  model: string;
  version: string;
}

/** $DOLPHIN_CACHE, else $XDG_CACHE_HOME/dolphin-routing, else ~/.cache/dolphin-routing (as build/vllm-setup.mjs). */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env["DOLPHIN_CACHE"]) return env["DOLPHIN_CACHE"];
  return join(env["XDG_CACHE_HOME"] || join(homedir(), ".cache"), "dolphin-routing");
}

export class VllmNotInstalled extends Error {
  constructor(detail: string) {
    super(`vLLM is not installed (${detail}): run npm run setup, which installs it into ${cacheRoot()}/vllm`);
    this.name = "VllmNotInstalled";
  }
}

/** The install, or a VllmNotInstalled that says to run npm run setup. */
export function vllmInstall(env: NodeJS.ProcessEnv = process.env): VllmInstall {
  const home = join(cacheRoot(env), "vllm");
  const stamp = join(home, "installed.json");
  if (!existsSync(stamp)) throw new VllmNotInstalled(`no ${stamp}`);
  let s: { vllm?: unknown; paths?: Record<string, unknown> };
  try {
    s = JSON.parse(readFileSync(stamp, "utf8")) as typeof s;
  } catch (e) {
    throw new VllmNotInstalled(`${stamp} is unreadable: ${(e as Error).message}`);
  }
  const p = s.paths ?? {};
  const [python, vllm, model] = [p["python"], p["vllm"], p["model"]];
  if (typeof python !== "string" || typeof vllm !== "string" || typeof model !== "string")
    throw new VllmNotInstalled(`${stamp} names no paths`);
  for (const f of [python, vllm, join(model, "config.json")])
    if (!existsSync(f)) throw new VllmNotInstalled(`${f} is missing`);
  return { home, python, vllm, model, version: String(s.vllm ?? "?") };
}
