// One decode stream relayed to the client (StreamRelay), and what an answer's usage tells the request (noteUsage,
// clientCachedTokens): the decode call of remote-path.ts hands its worker's SSE answer here once its headers are in.

import type { IncomingMessage } from "node:http";
import { drained } from "../http-toolkit.js";
import { prematureClose, UpstreamError, usageOf, UsageSniffer } from "./upstream.js";
import { UsageEventFilter } from "./stream-usage.js";
import { CachedTokensStream } from "./cached-tokens.js";
import type { RequestContext } from "./request-context.js";

type Usage = NonNullable<ReturnType<typeof usageOf>>;

const LF = 0x0a;
const NOTHING = Buffer.alloc(0);

/**
 * One decode stream relayed to the client. What has come in is read and written on in one piece per read (`read()`
 * gives all that is buffered), so a burst of SSE events costs one chunk to the client, not one per event; when the
 * worker's answer is complete, the last piece goes with the end of the client's answer in the same write. The worker
 * waits while the client's socket is full. Usage is sniffed from the bytes as they pass; one idle timer, refreshed
 * per read. When the proxy asked for usage the client did not (ctx.usageAsked), the bytes pass through a
 * UsageEventFilter instead, which reads the usage and takes its event out (holding back at most an incomplete last
 * line). `over` is called once: with null when the stream ended (the client's answer ended too) or the client left
 * (its stream is dropped), with the error when the worker's stream failed (the caller ends the client's answer with
 * an error event, on a line of its own: `atLineStart` says whether what was passed on ends with a blank line; a line
 * the filter held back is dropped).
 */
export class StreamRelay {
  /** Usage read from the bytes as they pass (the client asked for it, or the stream carries none). */
  private readonly sniffer: UsageSniffer | null;
  /** Usage read and its event taken out of what the client gets (the proxy asked for it). */
  private readonly filter: UsageEventFilter | null;
  /** The remote path's cached tokens told to the client (cached-tokens.ts), when the client's stream has usage. */
  private readonly rewrite: CachedTokensStream | null;
  private timer: NodeJS.Timeout | null = null;
  /** The last two bytes passed on. */
  private last = LF;
  private beforeLast = LF;
  private done = false;
  /** Waiting for the client's socket to drain. */
  private blocked = false;

  constructor(
    private readonly ctx: RequestContext,
    private readonly upstream: IncomingMessage,
    idleMs: number,
    private readonly releasePrefill: () => void,
    private readonly over: (e: unknown, atLineStart: boolean) => void,
  ) {
    this.filter = ctx.usageAsked ? new UsageEventFilter() : null;
    this.sniffer = this.filter ? null : new UsageSniffer();
    const cached = this.filter ? null : clientCachedTokens(ctx);
    this.rewrite = cached === null ? null : new CachedTokensStream(cached);
    // on() rather than once(): each handler does nothing after the first event that ends the relay (`done`), and
    // once() wraps each listener in two more objects per stream
    upstream.on("readable", () => this.pump());
    upstream.on("end", () => this.end());
    upstream.on("error", (e) => this.failed(e));
    // closed without an end or an error: what an async iterator reports as a premature close
    upstream.on("close", () => {
      if (!upstream.readableEnded) this.failed(prematureClose());
    });
    this.pump(); // what is in already (often all of it)
    if (!this.done)
      this.timer = setTimeout(
        () => upstream.destroy(new UpstreamError("timeout", `stream stalled for ${idleMs} ms`)),
        idleMs,
      );
  }

  private pump(): void {
    const { ctx, upstream } = this;
    while (!this.done && !this.blocked) {
      const chunk = upstream.read() as Buffer | null;
      if (chunk === null) return;
      this.timer?.refresh();
      if (ctx.clientGone) {
        this.releasePrefill();
        this.finish(null);
        upstream.destroy();
        return;
      }
      // the worker's answer all in: its last piece and the end of the client's answer in one write (the read that
      // emptied an ended stream's buffer has its 'end' emitted)
      const last = upstream.complete && upstream.readableLength === 0;
      // what the client gets of it: all of it, unless the proxy asked for usage (then without the usage event; at
      // times nothing yet, an incomplete line held back)
      let out = this.filter ? this.filter.push(chunk, last) : chunk;
      if (this.rewrite) out = this.rewrite.push(out, last);
      let full = false;
      if (last) ctx.res.end(out);
      else if (out.length > 0) full = !ctx.res.write(out);
      // bookkeeping once the bytes have left
      this.releasePrefill();
      this.sniffer?.push(chunk);
      const n = out.length;
      if (n >= 2) {
        this.beforeLast = out[n - 2]!;
        this.last = out[n - 1]!;
      } else if (n === 1) {
        this.beforeLast = this.last;
        this.last = out[0]!;
      }
      if (last) {
        this.finish(null);
        return;
      }
      if (full) {
        this.blocked = true;
        void drained(ctx.res).then(() => {
          this.blocked = false;
          this.pump();
        });
      }
    }
  }

  private end(): void {
    if (this.done) return;
    // what the filter still holds (an incomplete last line) goes with the end
    let rest = this.filter?.push(NOTHING, true);
    if (this.rewrite) rest = this.rewrite.push(rest ?? NOTHING, true);
    this.finish(null);
    if (rest && rest.length > 0) this.ctx.res.end(rest);
    else this.ctx.res.end();
  }

  private failed(e: unknown): void {
    if (this.done) return;
    this.finish(this.ctx.clientGone ? null : e);
  }

  private finish(e: unknown): void {
    this.done = true;
    if (this.timer) clearTimeout(this.timer);
    const usage = (this.filter ?? this.sniffer!).usage;
    if (usage) noteUsage(this.ctx, usage);
    this.over(e, this.beforeLast === LF && this.last === LF);
  }
}

/**
 * The cached tokens the client's usage should say, when they may differ from what the decode worker reports: on the
 * remote path, the prefill worker's count (cached-tokens.ts).
 */
export function clientCachedTokens(ctx: RequestContext): number | null {
  return ctx.record?.route === "remote" && ctx.reportedTokens !== null ? ctx.reportedTokens : null;
}

/** What the decode worker reported: its cached tokens (unless the prefill worker's count already stands), its output. */
export function noteUsage(ctx: RequestContext, usage: Usage): void {
  if (ctx.record?.route !== "remote") {
    if (usage.cached !== null) ctx.reportedTokens = usage.cached;
  } else ctx.decodeReportedTokens = usage.cached;
  if (usage.completion !== null) ctx.completionTokens = usage.completion;
}
