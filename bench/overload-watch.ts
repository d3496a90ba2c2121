// What bench overload reads from the proxy while it is overloaded, apart from the generator's own counts: its
// resident memory and CPU time (/proc/<pid>), its gauges (scraped from /metrics over one connection opened before the
// overload) and counters (/metrics after), and what the kernel held for it (its accept queue, the machine's listen
// overflows and drops). Linux's /proc; each reading is null elsewhere.

import { readFileSync } from "node:fs";
import http from "node:http";
import type { OverloadBenchResult, Peaks } from "./overload-result.js";

/** How much the proxy's RSS may still rise in the overload's last third (see RssSampler). */
const RSS_PLATEAU_MB = 16;
/** USER_HZ of /proc/<pid>/stat: 100 on every Linux this runs on. */
const CLOCK_TICKS = 100;

/**
 * The proxy's VmRSS from /proc once a second (Linux); MB. Bounded means it levelled off: the peak of the overload's
 * last third is at most RSS_PLATEAU_MB above the peak of the first two thirds (memory that grew with time, not with
 * the limits, would keep climbing; a fixed slack would only restate the machine's allocator).
 */
export class RssSampler {
  private readonly samples: number[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly start: number | null;

  constructor(private readonly pid: number | undefined) {
    this.start = this.read();
    this.timer = setInterval(() => {
      const v = this.read();
      if (v !== null) this.samples.push(v);
    }, 1000);
  }

  private read(): number | null {
    if (this.pid === undefined) return null;
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.pid}/status`, "utf8"));
      return m ? Math.round(Number(m[1]) / 1024) : null;
    } catch {
      return null;
    }
  }

  stop(): OverloadBenchResult["proxy_rss_mb"] {
    clearInterval(this.timer);
    const end = this.read();
    const all = [...this.samples, ...(end !== null ? [end] : [])];
    const peak = all.length ? Math.max(...all) : null;
    const cut = Math.ceil((all.length * 2) / 3);
    const early = all.slice(0, cut);
    const late = all.slice(cut);
    const levelled = early.length > 0 && late.length > 0 ? Math.max(...late) - Math.max(...early) : null;
    return {
      start: this.start,
      peak,
      end,
      growth: this.start !== null && peak !== null ? peak - this.start : null,
      last_third_rise: levelled,
      bounded: levelled === null ? null : levelled <= RSS_PLATEAU_MB,
    };
  }
}

/** A GET's body over `agent`; rejects on any failure or after `timeoutMs`. */
function getText(url: string, agent: http.Agent, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent, timeout: timeoutMs }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => (text += c));
      res.on("end", () => resolve(text));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

/**
 * The proxy's in-flight, queued and event-loop-lag gauges every 2 s, over one keep-alive connection opened before the
 * overload (a new one would wait behind the generator's in the accept queue); a scrape that takes over 1.5 s is skipped.
 */
export class GaugeWatch {
  private readonly peaks: Peaks = {
    inflight: 0,
    queued: 0,
    event_loop_lag_ms: 0,
    event_loop_utilization: 0,
    shed_share: 0,
    scrapes: 0,
  };
  private readonly timer: NodeJS.Timeout;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private n = 0;
  /** The proxy's accept queue at its longest (null where /proc/net/tcp cannot be read). */
  acceptQueuePeak: number | null = null;

  constructor(url: string, progress: (l: string) => void) {
    const port = Number(new URL(url).port);
    const scrape = (): void => {
      const queued = acceptQueue(port);
      if (queued !== null) this.acceptQueuePeak = Math.max(this.acceptQueuePeak ?? 0, queued);
      getText(`${url}/metrics`, this.agent, 1500)
        .then((text) => {
          const g = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
          const now = {
            inflight: g("dolphin_inflight_requests"),
            queued: g("dolphin_queued_requests"),
            lag: Math.round(g("dolphin_event_loop_lag_seconds") * 1000),
            utilization: g("dolphin_event_loop_utilization"),
            shedShare: g("dolphin_shed_share"),
          };
          const p = this.peaks;
          p.scrapes++;
          p.inflight = Math.max(p.inflight, now.inflight);
          p.queued = Math.max(p.queued, now.queued);
          p.event_loop_lag_ms = Math.max(p.event_loop_lag_ms, now.lag);
          p.event_loop_utilization = Math.max(p.event_loop_utilization, now.utilization);
          p.shed_share = Math.max(p.shed_share, now.shedShare);
          if (++this.n % 3 === 0)
            progress(
              `  proxy: ${now.inflight} in flight, ${now.queued} queued, lag ${now.lag} ms, ` +
                `loop busy ${now.utilization}, shedding ${now.shedShare}`,
            );
        })
        .catch(() => undefined);
    };
    scrape(); // opens the connection before the generator starts (a second later)
    this.timer = setInterval(scrape, 2000);
  }

  stop(): Peaks {
    clearInterval(this.timer);
    this.agent.destroy();
    return { ...this.peaks };
  }
}

/**
 * The accept queue of the loopback listener on `port`: for a socket in LISTEN (st 0A), /proc/net/tcp's rx_queue is
 * the connections completed and not yet accepted. Linux only; null elsewhere or when not found.
 */
function acceptQueue(port: number): number | null {
  try {
    const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
    for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n")) {
      const f = line.trim().split(/\s+/);
      if (f[3] === "0A" && f[1]?.endsWith(`:${hexPort}`)) return parseInt(f[4]!.split(":")[1]!, 16);
    }
  } catch {
    // not Linux
  }
  return null;
}

/** The machine's listen-queue overflows and drops so far (/proc/net/netstat, TcpExt); null where unreadable. */
export function listenCounters(): { overflows: number; drops: number } | null {
  try {
    const lines = readFileSync("/proc/net/netstat", "utf8").split("\n");
    const i = lines.findIndex((l) => l.startsWith("TcpExt:"));
    const names = lines[i]!.split(/\s+/);
    const values = lines[i + 1]!.split(/\s+/).map(Number);
    const of = (name: string): number => values[names.indexOf(name)] ?? NaN;
    const r = { overflows: of("ListenOverflows"), drops: of("ListenDrops") };
    return Number.isFinite(r.overflows) && Number.isFinite(r.drops) ? r : null;
  } catch {
    return null;
  }
}

/** dolphin_shed_total by reason, and dolphin_requests_total by status, from the proxy's /metrics. */
export async function proxyCounts(url: string): Promise<{
  shed: Record<string, number>;
  byStatus: Record<string, number>;
  ejections: Record<string, number>;
  durationLe: { p50: number | null; p99: number | null };
}> {
  const text = await (await fetch(`${url}/metrics`)).text();
  // dolphin_request_duration_seconds: the bucket bound under which 50 % and 99 % of the answers took
  const buckets = new Map<number, number>();
  for (const m of text.matchAll(/^dolphin_request_duration_seconds_bucket\{[^}]*le="([^"]+)"[^}]*\} (\S+)$/gm)) {
    const le = m[1] === "+Inf" ? Infinity : Number(m[1]);
    buckets.set(le, (buckets.get(le) ?? 0) + Number(m[2]));
  }
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  const le = (q: number): number | null => (total === 0 ? null : (sorted.find(([, n]) => n >= q * total)?.[0] ?? null));
  const shed: Record<string, number> = {};
  for (const m of text.matchAll(/^dolphin_shed_total\{reason="([^"]+)"\} (\S+)$/gm)) shed[m[1]!] = Number(m[2]);
  const ejections: Record<string, number> = {};
  for (const m of text.matchAll(/^dolphin_ejections_total\{cause="([^"]+)"\} (\S+)$/gm))
    ejections[m[1]!] = Number(m[2]);
  const byStatus: Record<string, number> = {};
  for (const m of text.matchAll(/^dolphin_requests_total\{[^}]*status="(\d+)"[^}]*\} (\S+)$/gm))
    byStatus[m[1]!] = (byStatus[m[1]!] ?? 0) + Number(m[2]);
  return { shed, byStatus, ejections, durationLe: { p50: le(0.5), p99: le(0.99) } };
}

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat (Linux; null elsewhere). */
export function cpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / CLOCK_TICKS;
  } catch {
    return null;
  }
}
