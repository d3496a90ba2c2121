// A worker's compatibility group as its engine tells it (`group_from_engine`): what vLLM exposes of the factors its
// NixlConnector checks before a KV handoff (compute_nixl_compatibility_hash): the version (GET /version), the model
// (GET /v1/models: the first model's root, the path or repository it was loaded from) and the KV cache's block size
// and dtype (GET /metrics: vllm:cache_config_info's labels). dtype, attention backend and speculative config are not
// exposed: engines that differ only in those need a `group` in the config. docs/serving.md "Compatibility groups".

import { isPlainObject } from "../../contract/values.js";

/** The group read from the engine at `url`, e.g. `vllm 0.32.0, model /models/llama, block_size 16, cache_dtype auto`. */
export async function engineGroup(url: string, timeoutMs: number, authorization: string | null): Promise<string> {
  const get = async (path: string): Promise<Response> => {
    const r = await fetch(`${url}${path}`, {
      headers: authorization ? { authorization } : {},
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!r.ok) throw new Error(`GET ${path} answered ${r.status}`);
    return r;
  };
  const version = await get("/version").then((r) => r.json() as Promise<unknown>);
  const models = await get("/v1/models").then((r) => r.json() as Promise<unknown>);
  const metrics = await get("/metrics").then((r) => r.text());
  const parts: string[] = [];
  if (isPlainObject(version) && typeof version["version"] === "string") parts.push(`vllm ${version["version"]}`);
  const first = isPlainObject(models) && Array.isArray(models["data"]) ? models["data"][0] : undefined;
  if (isPlainObject(first)) {
    const root = typeof first["root"] === "string" ? first["root"] : first["id"];
    if (typeof root === "string") parts.push(`model ${root}`);
  }
  const info = cacheConfigInfo(metrics);
  for (const label of ["block_size", "cache_dtype"])
    if (info[label] !== undefined) parts.push(`${label} ${info[label]}`);
  if (parts.length === 0) throw new Error("the engine tells neither its version, its model nor its cache config");
  return parts.join(", ");
}

/** The labels of vllm:cache_config_info in a Prometheus text (empty when absent). */
export function cacheConfigInfo(text: string): Record<string, string> {
  const line = text.split("\n").find((l) => l.startsWith("vllm:cache_config_info{"));
  const out: Record<string, string> = {};
  if (!line) return out;
  const labels = line.slice(line.indexOf("{") + 1, line.lastIndexOf("}"));
  for (const m of labels.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) out[m[1]!] = m[2]!.replace(/\\(.)/g, "$1");
  return out;
}
