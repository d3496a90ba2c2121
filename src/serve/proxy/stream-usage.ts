// A stream's usage when the client did not ask for it. The drift guard judges an answer by its output tokens, and the
// cache check compares predicted with reported cached tokens: both read the worker's `usage`, which a stream carries
// only with `stream_options.include_usage`, and the OpenAI SDKs do not ask for it. So the proxy asks the decode worker
// itself (askForUsage) and takes the usage-only event the worker then adds out of the client's stream
// (UsageEventFilter), reading the usage from it on the way: the client gets the events it asked for.

import { isPlainObject } from "../../contract/values.js";
import { DATA_FIELD, parseJson, skipSpace, USAGE_KEY, usageOf } from "./upstream.js";

type Usage = NonNullable<ReturnType<typeof usageOf>>;

/**
 * The body the decode worker is sent for a streamed request that did not ask for usage, asking for it: the client's
 * bytes with `"stream_options":{"include_usage":true},` after the opening brace when the body has no stream_options
 * (the usual case: one copy, no serialization), else re-serialized with the client's stream_options plus
 * include_usage (askedOptions). null when the proxy does not ask: not a stream, the client asked already, or its
 * stream_options is not an object (the worker answers that mistake with its 400, as it would without the proxy).
 */
export function askForUsage(raw: Buffer, body: Record<string, unknown>): Buffer | string | null {
  const options = askedOptions(body);
  if (options === null) return null;
  if (body["stream_options"] === undefined) {
    const open = skipSpace(raw, 0);
    // an empty object cannot take the key and its comma (a validated request is never empty; kept safe anyway)
    if (raw[open] === OPEN_BRACE && raw[skipSpace(raw, open + 1)] !== CLOSE_BRACE)
      return Buffer.concat([raw.subarray(0, open + 1), ASK_USAGE, raw.subarray(open + 1)]);
  }
  return JSON.stringify({ ...body, stream_options: options });
}

/**
 * The stream_options the decode worker gets when the proxy asks for usage on the client's behalf, or null when it
 * does not ask (see askForUsage). The client's other keys are kept, but for vLLM's `continuous_usage_stats`: with
 * include_usage it puts usage in every chunk, which the client (who, without include_usage, had it do nothing) did
 * not ask for; only the usage-only event is taken out of the stream.
 */
export function askedOptions(body: Record<string, unknown>): Record<string, unknown> | null {
  if (body["stream"] !== true) return null;
  const given = body["stream_options"];
  if (given === undefined || given === null) return { include_usage: true };
  if (!isPlainObject(given) || given["include_usage"] === true) return null;
  const options: Record<string, unknown> = { ...given, include_usage: true };
  delete options["continuous_usage_stats"];
  return options;
}

const ASK_USAGE = Buffer.from('"stream_options":{"include_usage":true},');
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const LF = 0x0a;
const CR = 0x0d;
/**
 * The longest incomplete line held back. A usage-only event is a few hundred bytes; a longer line is not one, so it
 * is passed on as it arrives rather than held (a content chunk with large logprobs, or a stream that never ends its
 * lines with a line feed).
 */
const MAX_HELD_LINE_BYTES = 64 << 10;

/**
 * The decode worker's SSE bytes, as the client gets them when the proxy asked for usage the client did not: the
 * usage-only event (a `data:` line whose JSON has `"choices":[]` and a `usage` object, alone in its event: vLLM's last
 * before `data: [DONE]`) is taken out, and its usage kept (`usage`, from any `data:` line carrying one, as UsageSniffer). Everything else
 * passes byte for byte, in one piece per piece pushed (usually the piece itself, no copy): only an incomplete last line
 * is held back until its end arrives, since it may be the start of the usage event (a client's SSE parser could not
 * use half a line anyway), and a complete usage line until the blank line that ends its event.
 */
export class UsageEventFilter {
  usage: Usage | null = null;
  /** Bytes received but not passed on: an incomplete line (or a usage line waiting for the blank line after it). */
  private held: Buffer | null = null;
  /** What has been passed on ends where an event may begin: nothing yet, or a blank line. */
  private atEventStart = true;
  /** A line longer than MAX_HELD_LINE_BYTES is being passed on as it comes, unread up to its line feed. */
  private inLongLine = false;

  /**
   * The bytes to pass on for `chunk` (empty when all of it is held back). `last`: the stream is over, and what is
   * held back goes too (an incomplete line at the end was never an event).
   */
  push(chunk: Buffer, last = false): Buffer {
    const buf = this.held ? Buffer.concat([this.held, chunk]) : chunk;
    this.held = null;
    // `from`: where the lines this call reads begin (after the end of a long line passed on unread)
    let from = 0;
    if (this.inLongLine) {
      const lf = buf.indexOf(LF);
      if (lf < 0) return buf;
      this.inLongLine = false;
      this.atEventStart = false;
      from = lf + 1;
    }
    // complete lines end at the last line feed; the rest is held back, unless too long or the stream is over
    let keepFrom = buf.lastIndexOf(LF) + 1;
    if (keepFrom < from) keepFrom = from;
    const cuts: number[] = []; // [start, end) pairs taken out, in order
    for (let at = buf.indexOf(USAGE_KEY, from); at >= 0 && at < keepFrom;) {
      const start = at === 0 ? 0 : buf.lastIndexOf(LF, at - 1) + 1;
      const end = buf.indexOf(LF, at); // < keepFrom: a line feed ends the complete lines
      const eventEnd = this.usageEvent(buf, from, start, end);
      if (eventEnd === WAIT) {
        keepFrom = start;
        break;
      }
      if (eventEnd > 0) cuts.push(start, eventEnd);
      at = buf.indexOf(USAGE_KEY, Math.max(end, eventEnd));
    }
    if (last) keepFrom = buf.length;
    else if (buf.length - keepFrom > MAX_HELD_LINE_BYTES) {
      // too long to be the usage event: passed on now, and the rest of its line unread as it comes
      keepFrom = buf.length;
      this.inLongLine = buf[buf.length - 1] !== LF;
    }
    this.atEventStart = this.endsAtEventStart(buf, from, keepFrom);
    if (keepFrom < buf.length) this.held = Buffer.from(buf.subarray(keepFrom));
    if (cuts.length === 0) return keepFrom === buf.length ? buf : buf.subarray(0, keepFrom);
    const pieces: Buffer[] = [];
    let pos = 0;
    for (let i = 0; i < cuts.length; i += 2) {
      if (cuts[i]! > pos) pieces.push(buf.subarray(pos, cuts[i]));
      pos = cuts[i + 1]!;
    }
    if (keepFrom > pos) pieces.push(buf.subarray(pos, keepFrom));
    return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  }

  /**
   * The complete line [start, end) of `buf` holds `"usage"`: its usage is kept when it is a `data:` line carrying
   * one, and when it is a usage-only event of its own (after a blank line, followed by one) the end of that event
   * (after its blank line) is returned, to be taken out; 0 when it stays; WAIT when the line after it has not come.
   */
  private usageEvent(buf: Buffer, from: number, start: number, end: number): number {
    const line = buf.subarray(start, end);
    if (!DATA_FIELD.equals(line.subarray(0, DATA_FIELD.length))) return 0;
    // parsed whole (once): whether `choices` is empty decides, not the usage alone (UsageSniffer reads only that)
    const v = parseJson(line.subarray(DATA_FIELD.length));
    const usage = usageOf(v);
    if (usage === null) return 0;
    this.usage = usage;
    const usageOnly = isPlainObject(v) && Array.isArray(v["choices"]) && v["choices"].length === 0;
    if (!usageOnly || !this.blankBefore(buf, from, start)) return 0;
    const next = end + 1;
    if (next === buf.length) return WAIT;
    if (buf[next] === LF) return next + 1;
    if (buf[next] !== CR) return 0;
    if (next + 1 === buf.length) return WAIT;
    return buf[next + 1] === LF ? next + 2 : 0;
  }

  /** The line starting at `start` begins an event: the line before it is blank (or it is the stream's first). */
  private blankBefore(buf: Buffer, from: number, start: number): boolean {
    if (start === from) return from === 0 ? this.atEventStart : false; // after a long line
    return isBlankLineBefore(buf, from, start);
  }

  /** Whether what is passed on, buf[0, keepFrom), ends where an event may begin. */
  private endsAtEventStart(buf: Buffer, from: number, keepFrom: number): boolean {
    if (this.inLongLine) return false;
    if (keepFrom === from) return from === 0 ? this.atEventStart : false;
    if (buf[keepFrom - 1] !== LF) return false; // the stream's incomplete last line, passed on at its end
    return isBlankLineBefore(buf, from, keepFrom);
  }
}

/** usageEvent's answer for a usage line whose next line has not arrived. */
const WAIT = -1;

/** The line ending just before `start` (buf[start − 1] is its line feed, and it begins at or after `from`) is empty. */
function isBlankLineBefore(buf: Buffer, from: number, start: number): boolean {
  const lineStart = start >= 2 ? Math.max(from, buf.lastIndexOf(LF, start - 2) + 1) : from;
  const length = start - 1 - lineStart;
  return length === 0 || (length === 1 && buf[lineStart] === CR);
}
