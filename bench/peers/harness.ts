// The peers' harnesses as the differential tests and `dolphin bench peers` call them: one JSON request on stdin,
// one JSON answer on stdout, from the binaries `npm run setup` built (build/peers-setup.mjs) into the per-user
// cache. A missing binary says to run npm run setup; a harness's own error (exit 2, reason on stderr) is thrown.

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { cacheRoot } from "../../src/serve/vllm/install.js";

export type Peer = "dynamo" | "llmd";

const CRATE: Record<Peer, string> = {
  dynamo: "dynamo-kv-router 1.6.1 (bench/peers/dynamo)",
  llmd: "llm-d-kv-cache v0.9.0 (bench/peers/llmd)",
};

/** The harness binary of `peer` (as build/peers-setup.mjs's peersPaths names it). */
export function peerBinary(peer: Peer, env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheRoot(env), "peers", "bin", `dolphin-peer-${peer}`);
}

export class PeerNotBuilt extends Error {
  constructor(peer: Peer, path: string) {
    super(`the ${CRATE[peer]} harness is not built (no ${path}): run npm run setup`);
    this.name = "PeerNotBuilt";
  }
}

/**
 * The llm-d harness with our Go binding beside llm-d (`-tags dolphin`: bench/peers/llmd/dolphin.go), built now into
 * the cache from the modules `npm run setup` fetched (offline) and the core this checkout built (bindings/go/core.wasm).
 */
export function buildGoBeside(root: string, env: NodeJS.ProcessEnv = process.env): string {
  const peers = join(cacheRoot(env), "peers");
  if (!existsSync(join(root, "bindings", "go", "core.wasm")))
    throw new Error("bindings/go/core.wasm is missing: run npm run build (the Go binding embeds the core)");
  if (!existsSync(peerBinary("llmd", env))) throw new PeerNotBuilt("llmd", peerBinary("llmd", env));
  const out = join(peers, "bin", "dolphin-peer-llmd-go");
  const r = spawnSync("go", ["build", "-tags", "dolphin", "-trimpath", "-o", out, "."], {
    cwd: join(root, "bench", "peers", "llmd"),
    encoding: "utf8",
    env: {
      ...env,
      CGO_ENABLED: "0",
      GOFLAGS: "-mod=readonly -modcacherw",
      GOPROXY: "off",
      GOMODCACHE: join(peers, "go", "mod"),
      GOCACHE: join(peers, "go", "build"),
    },
  });
  if (r.error || r.status !== 0)
    throw new Error(`go build -tags dolphin (bench/peers/llmd) failed: ${r.error?.message ?? r.stderr.trim()}`);
  return out;
}

/** Sends `request` to the peer's harness (or the binary at `bin`) and returns its answer. */
export function callPeer<T = unknown>(peer: Peer, request: object, bin = peerBinary(peer)): T {
  if (!existsSync(bin)) throw new PeerNotBuilt(peer, bin);
  const r = spawnSync(bin, [], { input: JSON.stringify(request), encoding: "utf8", maxBuffer: 1 << 30 });
  if (r.error) throw new Error(`${bin}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${bin} exited ${r.status}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout) as T;
}
