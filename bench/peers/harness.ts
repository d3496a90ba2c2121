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

/** Sends `request` to the peer's harness and returns its answer. */
export function callPeer<T = unknown>(peer: Peer, request: object): T {
  const bin = peerBinary(peer);
  if (!existsSync(bin)) throw new PeerNotBuilt(peer, bin);
  const r = spawnSync(bin, [], { input: JSON.stringify(request), encoding: "utf8", maxBuffer: 1 << 30 });
  if (r.error) throw new Error(`${bin}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${bin} exited ${r.status}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout) as T;
}
