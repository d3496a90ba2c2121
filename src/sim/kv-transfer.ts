// The time to ship a request's KV from a prefill instance to a decode instance: link presets (bandwidth per link),
// the transfer model (setup cost, achieved share of the bandwidth, links used in parallel) and links by name (custom
// ones from a cluster file first: cluster-file.ts). Figures: shared/docs/perf-model.md; the transfer model's fit:
// docs/simulator-calibration.md. Pure functions, no I/O, no Node built-ins (the browser explorer loads this).

import type { ModelPreset } from "./model-presets.js";

export interface LinkPreset {
  name: string;
  gbPerSecond: number;
  /** This link's own setup cost and achieved share, over the transfer model's (a link measured by dolphin calibrate). */
  alphaMs?: number;
  eta?: number;
}
export type LinkName = "nvlink" | "ib-ndr" | "ib-hdr" | "100gbe";

/** Bandwidth per link, one direction, GB/s (10^9 bytes): shared/docs/perf-model.md. */
export const LINKS: Record<LinkName, LinkPreset> = {
  nvlink: { name: "nvlink", gbPerSecond: 450 }, // NVLink 4, per GPU
  "ib-ndr": { name: "ib-ndr", gbPerSecond: 50 }, // InfiniBand NDR / RoCE 400G
  "ib-hdr": { name: "ib-hdr", gbPerSecond: 25 }, // InfiniBand HDR / RoCE 200G
  "100gbe": { name: "100gbe", gbPerSecond: 12.5 },
};

/** alpha: per-transfer setup (RDMA); eta: achieved share of link bandwidth; links: links used in parallel. */
export interface TransferModel {
  alphaMs: number;
  eta: number;
  links: number;
}

/** A fit of Mooncake's measured vLLM 1P1D transfers (docs/simulator-calibration.md). */
export const DEFAULT_TRANSFER: TransferModel = { alphaMs: 0.5, eta: 0.7, links: 1 };

/**
 * Time to ship the KV of `tokens` tokens: alpha + bytes / (eta · bandwidth · links), with the link's own alpha and eta
 * where it has them. No tokens, no transfer: 0.
 */
export function kvTransferMs(
  tokens: number,
  p: ModelPreset,
  link: LinkPreset,
  t: TransferModel = DEFAULT_TRANSFER,
): number {
  if (tokens <= 0) return 0;
  const bytesPerMs = (link.eta ?? t.eta) * link.gbPerSecond * t.links * 1e6; // GB/s = 10^6 bytes per ms
  return (link.alphaMs ?? t.alphaMs) + (tokens * p.kvBytesPerToken) / bytesPerMs;
}

/** A link by name: custom links first, then the built-in ones. */
export function resolveLink(name: string, extra?: Record<string, LinkPreset>): LinkPreset {
  const found =
    (extra && Object.hasOwn(extra, name) ? extra[name] : undefined) ??
    (Object.hasOwn(LINKS, name) ? LINKS[name as LinkName] : undefined);
  if (found) return found;
  const known = [...Object.keys(LINKS), ...Object.keys(extra ?? {})].sort();
  throw new Error(`unknown link "${name}" (known: ${known.join(", ")})`);
}
