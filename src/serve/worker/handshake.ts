// The emulated worker's NIXL handshake: before a decode request pulls KV from a prefill worker, the two engines must
// be compatible. vLLM 0.32's NixlConnector compares a compatibility hash (nixl/metadata.py
// compute_nixl_compatibility_hash: vLLM version, model, dtype, KV heads, layers, attention backend, cache dtype,
// speculative config, transfer mode) once per remote engine, and a mismatch fails the request (kv_load_failure_policy
// "fail", the default). Here the engine's version string (`--engine-version`, GET /version, as vLLM's API server
// answers it) stands for that hash: the decode worker asks the prefill worker's /version once per address and refuses
// the pull when it differs, counted in vllm:nixl_num_failed_transfers.

import { urlHost } from "../http-toolkit.js";
import { vllmError, type RemoteSource } from "./requests.js";

/** The version an emulated worker reports unless told another. */
export const EMULATED_ENGINE_VERSION = "0.32.0+dolphin-emulated";

export class NixlHandshake {
  /** Failed handshakes and pulls (vllm:nixl_num_failed_transfers). */
  failedTransfers = 0;
  private readonly remotes = new Map<string, Promise<string>>();
  /** The addresses whose handshake has completed (compatible or not). */
  private readonly completed = new Set<string>();

  constructor(readonly version: string) {}

  /** Whether the handshake with `remote`'s engine has completed (so a notification to it can be sent at once). */
  done(remote: RemoteSource): boolean {
    return this.completed.has(`${urlHost(remote.host)}:${remote.port}`);
  }

  /** Resolves when `remote` may be pulled from; throws vLLM's 500 when its engine is incompatible or unreachable. */
  async check(remote: RemoteSource): Promise<void> {
    const at = `${urlHost(remote.host)}:${remote.port}`;
    let theirs = this.remotes.get(at);
    if (!theirs) {
      theirs = this.versionAt(at);
      this.remotes.set(at, theirs);
      theirs.then(() => this.completed.add(at), noop);
      // a failed handshake is tried again on the next request (NIXL's does the same)
      theirs.catch(() => this.remotes.delete(at));
    }
    let version: string;
    try {
      version = await theirs;
    } catch (e) {
      this.failedTransfers++;
      throw vllmError(500, "InternalServerError", `NIXL handshake with ${at} failed: ${(e as Error).message}`);
    }
    if (version !== this.version) {
      this.failedTransfers++;
      throw vllmError(
        500,
        "InternalServerError",
        `NIXL compatibility hash mismatch: local engine ${this.version}, remote ${at} ${version}. Prefill and decode instances have incompatible configurations`,
      );
    }
  }

  private async versionAt(at: string): Promise<string> {
    const r = await fetch(`http://${at}/version`, { signal: AbortSignal.timeout(5000) });
    const body = (await r.json()) as { version?: unknown };
    if (!r.ok || typeof body.version !== "string") throw new Error(`GET /version answered ${r.status}`);
    return body.version;
  }
}

function noop(): void {}
