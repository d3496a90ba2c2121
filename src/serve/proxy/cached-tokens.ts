// What the client is told was cached, on the remote path: the prefill engine's count of the prompt's cached tokens,
// which is what was cached when the prompt was computed. Clients bill and tune on
// `usage.prompt_tokens_details.cached_tokens`, so on the remote path the decode engine's figure is rewritten to the
// prefill engine's, as llm-d's routing sidecar does. vLLM 0.32 already reports it so (its prefill answer's
// kv_transfer_params carry remote_prefill_cached_tokens, which the decode engine reports), and there the rewrite
// changes nothing; a decode engine without that (earlier vLLM, other engines) reports its local plus transferred
// hits, the whole prompt. The answer's other bytes pass unchanged.
//
// `"cached_tokens":` can only be a key in JSON (a quote inside a string is escaped), so the rewrite works on the
// bytes: every `"cached_tokens": <integer>` gets the new integer.

const KEY = Buffer.from('"cached_tokens"');
const LF = 0x0a;
const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
const COLON = 0x3a;
/** A line longer than this is passed on as it arrives (no usage line is): the rewrite never holds much. */
const MAX_HELD_BYTES = 64 << 10;

const isDigit = (b: number | undefined): boolean => b !== undefined && b >= 0x30 && b <= 0x39;

/** `buf` with every `"cached_tokens": N` replaced by `cached` (the same buffer when there is none). */
export function rewriteCachedTokens(buf: Buffer, cached: number): Buffer {
  let at = buf.indexOf(KEY);
  if (at < 0) return buf;
  const value = Buffer.from(String(cached));
  const pieces: Buffer[] = [];
  let pos = 0;
  while (at >= 0) {
    let i = at + KEY.length;
    while (SPACE.has(buf[i]!)) i++;
    if (buf[i] === COLON) {
      i++;
      while (SPACE.has(buf[i]!)) i++;
      const start = i;
      while (isDigit(buf[i])) i++;
      if (i > start) {
        pieces.push(buf.subarray(pos, start), value);
        pos = i;
      }
    }
    at = buf.indexOf(KEY, Math.max(i, at + KEY.length));
  }
  if (pos === 0) return buf;
  pieces.push(buf.subarray(pos));
  return Buffer.concat(pieces);
}

/**
 * The same rewrite over an SSE stream arriving in pieces: complete lines are rewritten and passed on, an incomplete
 * last line is held until its end arrives (a number cut between two pieces is never half rewritten), unless it is
 * longer than any usage line would be.
 */
export class CachedTokensStream {
  private held: Buffer | null = null;
  constructor(private readonly cached: number) {}

  push(chunk: Buffer, last = false): Buffer {
    const buf = this.held ? Buffer.concat([this.held, chunk]) : chunk;
    this.held = null;
    let keep = last ? buf.length : buf.lastIndexOf(LF) + 1;
    if (buf.length - keep > MAX_HELD_BYTES) keep = buf.length;
    if (keep < buf.length) this.held = Buffer.from(buf.subarray(keep));
    const out = keep === buf.length ? buf : buf.subarray(0, keep);
    return out.indexOf(KEY) < 0 ? out : rewriteCachedTokens(out, this.cached);
  }
}
