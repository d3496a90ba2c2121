// A small JSON reader for request bodies, the plugin configuration and the prefill worker's answer: it checks a
// document once (RFC 8259 grammar, bounded nesting) and then hands out spans of the original bytes. Nothing is
// re-serialized: a value that is passed on is copied from the client's bytes with the whitespace between tokens
// dropped, which for compact JSON (what OpenAI clients send) is exactly what JSON.stringify(JSON.parse(x)) gives.
// Every function returns a sentinel on bad input instead of throwing: a throw would trap the Envoy VM.

/** Deeper documents are rejected instead of recursing further (the VM's stack is small). */
// @ts-ignore: decorator
@inline const MAX_DEPTH: i32 = 64;

export const enum JsonType { Invalid = 0, Object, Array, String, Number, True, False, Null }

/** One JSON document: its bytes and spans into them. */
export class Json {
  constructor(readonly bytes: Uint8Array) {}

  get length(): i32 { return this.bytes.length; }

  @inline at(i: i32): i32 { return i < this.bytes.length ? <i32>unchecked(this.bytes[i]) : -1; }

  skipSpace(i: i32): i32 {
    while (i < this.bytes.length) {
      const c = unchecked(this.bytes[i]);
      if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) break;
      i++;
    }
    return i;
  }

  typeAt(i: i32): JsonType {
    const c = this.at(i);
    if (c == 0x7b) return JsonType.Object;
    if (c == 0x5b) return JsonType.Array;
    if (c == 0x22) return JsonType.String;
    if (c == 0x74) return JsonType.True;
    if (c == 0x66) return JsonType.False;
    if (c == 0x6e) return JsonType.Null;
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return JsonType.Number;
    return JsonType.Invalid;
  }

  /** True when the whole document is one valid JSON value (surrounding whitespace allowed). */
  isValid(): bool {
    const start = this.skipSpace(0);
    const end = this.valueEnd(start, 0);
    return end >= 0 && this.skipSpace(end) == this.bytes.length;
  }

  /** Where the document's one value starts (after leading whitespace). */
  root(): i32 { return this.skipSpace(0); }

  /** End (exclusive) of the value starting at `i`, or −1 when it is not valid JSON. */
  valueEnd(i: i32, depth: i32): i32 {
    const t = this.typeAt(i);
    if (t == JsonType.String) return this.stringEnd(i);
    if (t == JsonType.Number) return this.numberEnd(i);
    if (t == JsonType.True) return this.literalEnd(i, "true");
    if (t == JsonType.False) return this.literalEnd(i, "false");
    if (t == JsonType.Null) return this.literalEnd(i, "null");
    if (t == JsonType.Invalid || depth >= MAX_DEPTH) return -1;
    const close = t == JsonType.Object ? 0x7d : 0x5d;
    let p = this.skipSpace(i + 1);
    if (this.at(p) == close) return p + 1;
    while (true) {
      if (t == JsonType.Object) {
        if (this.at(p) != 0x22) return -1;
        p = this.stringEnd(p);
        if (p < 0) return -1;
        p = this.skipSpace(p);
        if (this.at(p) != 0x3a) return -1;
        p = this.skipSpace(p + 1);
      }
      p = this.valueEnd(p, depth + 1);
      if (p < 0) return -1;
      p = this.skipSpace(p);
      const c = this.at(p);
      if (c == close) return p + 1;
      if (c != 0x2c) return -1;
      p = this.skipSpace(p + 1);
    }
    return -1; // unreachable: the loop returns
  }

  private literalEnd(i: i32, word: string): i32 {
    for (let k = 0; k < word.length; k++) if (this.at(i + k) != word.charCodeAt(k)) return -1;
    return i + word.length;
  }

  private numberEnd(i: i32): i32 {
    let p = i;
    if (this.at(p) == 0x2d) p++;
    if (this.at(p) == 0x30) p++;
    else if (isDigit(this.at(p))) while (isDigit(this.at(p))) p++;
    else return -1;
    if (this.at(p) == 0x2e) {
      p++;
      if (!isDigit(this.at(p))) return -1;
      while (isDigit(this.at(p))) p++;
    }
    const e = this.at(p);
    if (e == 0x65 || e == 0x45) {
      p++;
      if (this.at(p) == 0x2b || this.at(p) == 0x2d) p++;
      if (!isDigit(this.at(p))) return -1;
      while (isDigit(this.at(p))) p++;
    }
    return p;
  }

  /** End of the string starting at the quote `i` (escapes checked, control characters rejected), or −1. */
  stringEnd(i: i32): i32 {
    if (this.at(i) != 0x22) return -1;
    let p = i + 1;
    while (true) {
      const c = this.at(p);
      if (c < 0x20) return -1; // end of input, or a raw control character
      if (c == 0x22) return p + 1;
      if (c == 0x5c) {
        const e = this.at(p + 1);
        if (e == 0x75) {
          for (let k = 2; k < 6; k++) if (hexValue(this.at(p + k)) < 0) return -1;
          p += 6;
        } else if (e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
          p += 2;
        } else return -1;
      } else p++;
    }
    return -1; // unreachable
  }

  /** The decoded text of the (valid) string at `i`, as UTF-8 bytes appended to `out`. */
  appendString(i: i32, out: Array<u8>): void {
    let p = i + 1;
    while (p < this.bytes.length) {
      const c = this.at(p);
      if (c == 0x22) return;
      if (c != 0x5c) {
        out.push(<u8>c);
        p++;
        continue;
      }
      const e = this.at(p + 1);
      if (e == 0x75) {
        let code = this.hex4(p + 2);
        p += 6;
        // a surrogate pair written as two escapes is one code point
        if (code >= 0xd800 && code < 0xdc00 && this.at(p) == 0x5c && this.at(p + 1) == 0x75) {
          const low = this.hex4(p + 2);
          if (low >= 0xdc00 && low < 0xe000) {
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            p += 6;
          }
        }
        // a lone surrogate becomes U+FFFD, as TextEncoder writes it
        if (code >= 0xd800 && code < 0xe000) code = 0xfffd;
        appendUtf8(code, out);
        continue;
      }
      out.push(<u8>(e == 0x62 ? 0x08 : e == 0x66 ? 0x0c : e == 0x6e ? 0x0a : e == 0x72 ? 0x0d : e == 0x74 ? 0x09 : e));
      p += 2;
    }
  }

  /** The decoded string at `i` as an AssemblyScript string (configuration values). */
  stringAt(i: i32): string {
    const out = new Array<u8>();
    this.appendString(i, out);
    return String.UTF8.decode(bytesOf(out).buffer);
  }

  /** The number at `i` (valid JSON number). */
  numberAt(i: i32): f64 {
    const end = this.numberEnd(i);
    if (end < 0) return NaN;
    return parseFloat(String.UTF8.decode(this.bytes.slice(i, end).buffer));
  }

  private hex4(p: i32): i32 {
    return (hexValue(this.at(p)) << 12) | (hexValue(this.at(p + 1)) << 8) | (hexValue(this.at(p + 2)) << 4) | hexValue(this.at(p + 3));
  }

  /** The members of the (valid) object at `i`: key text and value span, in document order. */
  members(i: i32): Array<Member> {
    const out = new Array<Member>();
    let p = this.skipSpace(i + 1);
    if (this.at(p) == 0x7d) return out;
    while (p < this.bytes.length) {
      const keyEnd = this.stringEnd(p);
      if (keyEnd < 0) return out;
      const key = this.stringAt(p);
      const v = this.skipSpace(this.skipSpace(keyEnd) + 1);
      const end = this.valueEnd(v, 0);
      if (end < 0) return out;
      out.push(new Member(key, p, v, end));
      p = this.skipSpace(end);
      if (this.at(p) != 0x2c) break;
      p = this.skipSpace(p + 1);
    }
    return out;
  }

  /** The items of the (valid) array at `i`, as value spans. */
  items(i: i32): Array<Span> {
    const out = new Array<Span>();
    let p = this.skipSpace(i + 1);
    if (this.at(p) == 0x5d) return out;
    while (p < this.bytes.length) {
      const end = this.valueEnd(p, 0);
      if (end < 0) return out;
      out.push(new Span(p, end));
      p = this.skipSpace(end);
      if (this.at(p) != 0x2c) break;
      p = this.skipSpace(p + 1);
    }
    return out;
  }

  /** Appends the bytes [start, end) with the whitespace between tokens removed (strings copied as they are). */
  appendCompact(start: i32, end: i32, out: Array<u8>): void {
    let inString = false;
    for (let p = start; p < end; p++) {
      const c = unchecked(this.bytes[p]);
      if (inString) {
        out.push(c);
        if (c == 0x5c && p + 1 < end) out.push(unchecked(this.bytes[++p]));
        else if (c == 0x22) inString = false;
      } else if (c == 0x22) {
        inString = true;
        out.push(c);
      } else if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) out.push(c);
    }
  }
}

export class Span {
  constructor(readonly start: i32, readonly end: i32) {}
}

/** An object member: its decoded key, where its key starts, and its value's span. */
export class Member {
  constructor(readonly key: string, readonly keyStart: i32, readonly start: i32, readonly end: i32) {}
}

/** The last member named `key` (JSON.parse keeps the last of duplicate keys), or null. */
export function memberNamed(members: Array<Member>, key: string): Member | null {
  for (let k = members.length - 1; k >= 0; k--) if (unchecked(members[k]).key == key) return unchecked(members[k]);
  return null;
}

export function bytesOf(out: Array<u8>): Uint8Array {
  const b = new Uint8Array(out.length);
  for (let k = 0; k < out.length; k++) unchecked(b[k] = out[k]);
  return b;
}

export function appendAscii(s: string, out: Array<u8>): void {
  for (let k = 0; k < s.length; k++) out.push(<u8>s.charCodeAt(k));
}

export function appendText(s: string, out: Array<u8>): void {
  const b = Uint8Array.wrap(String.UTF8.encode(s));
  for (let k = 0; k < b.length; k++) out.push(unchecked(b[k]));
}

/** A JSON string literal for `s` (quotes and the escapes JSON.stringify writes). */
export function appendQuoted(s: string, out: Array<u8>): void {
  out.push(0x22);
  const b = Uint8Array.wrap(String.UTF8.encode(s));
  for (let k = 0; k < b.length; k++) {
    const c = unchecked(b[k]);
    if (c == 0x22 || c == 0x5c) {
      out.push(0x5c);
      out.push(c);
    } else if (c < 0x20) {
      if (c == 0x0a) appendAscii("\\n", out);
      else if (c == 0x0d) appendAscii("\\r", out);
      else if (c == 0x09) appendAscii("\\t", out);
      else if (c == 0x08) appendAscii("\\b", out);
      else if (c == 0x0c) appendAscii("\\f", out);
      else {
        appendAscii("\\u00", out);
        out.push(<u8>HEX.charCodeAt(c >> 4));
        out.push(<u8>HEX.charCodeAt(c & 15));
      }
    } else out.push(c);
  }
  out.push(0x22);
}

const HEX = "0123456789abcdef";

function appendUtf8(code: i32, out: Array<u8>): void {
  if (code < 0x80) out.push(<u8>code);
  else if (code < 0x800) {
    out.push(<u8>(0xc0 | (code >> 6)));
    out.push(<u8>(0x80 | (code & 63)));
  } else if (code < 0x10000) {
    out.push(<u8>(0xe0 | (code >> 12)));
    out.push(<u8>(0x80 | ((code >> 6) & 63)));
    out.push(<u8>(0x80 | (code & 63)));
  } else {
    out.push(<u8>(0xf0 | (code >> 18)));
    out.push(<u8>(0x80 | ((code >> 12) & 63)));
    out.push(<u8>(0x80 | ((code >> 6) & 63)));
    out.push(<u8>(0x80 | (code & 63)));
  }
}

// @ts-ignore: decorator
@inline function isDigit(c: i32): bool { return c >= 0x30 && c <= 0x39; }

function hexValue(c: i32): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}
