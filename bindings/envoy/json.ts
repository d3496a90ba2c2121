// A small JSON reader for request bodies, the plugin configuration and the prefill worker's answer: it checks a
// document once (RFC 8259 grammar, bounded nesting) and then hands out spans of the original bytes. Nothing is
// re-serialized: a value that is passed on is copied from the client's bytes with the whitespace between tokens
// dropped, which for compact JSON (what OpenAI clients send) is exactly what JSON.stringify(JSON.parse(x)) gives.
// Every function returns a sentinel on bad input instead of throwing: a throw would trap the Envoy VM.

/** Deeper documents are rejected instead of recursing further (the VM's stack is small). */
// @ts-ignore: decorator
@inline const MAX_DEPTH: i32 = 64;

export const enum JsonType { Invalid = 0, Object, Array, String, Number, True, False, Null }

// The scanning runs on the document's raw bytes through two module globals (where they are, how many) and
// functions of integers only: with the incremental runtime every managed reference alive across a call (a `this`)
// is spilled to the shadow stack, which made a method-per-byte scanner some 30 times slower.
let base: usize = 0;
let limit: i32 = 0;

// @ts-ignore: decorator
@inline function byteAt(i: i32): i32 { return <u32>i < <u32>limit ? <i32>load<u8>(base + <usize>i) : -1; }

function skipWs(i: i32): i32 {
  while (i < limit) {
    const c = load<u8>(base + <usize>i);
    if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) break;
    i++;
  }
  return i;
}

function typeOf(i: i32): JsonType {
  const c = byteAt(i);
  if (c == 0x7b) return JsonType.Object;
  if (c == 0x5b) return JsonType.Array;
  if (c == 0x22) return JsonType.String;
  if (c == 0x74) return JsonType.True;
  if (c == 0x66) return JsonType.False;
  if (c == 0x6e) return JsonType.Null;
  if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return JsonType.Number;
  return JsonType.Invalid;
}

/** End (exclusive) of the value at `i`, or −1 when it is not valid JSON (`depth` bounds the nesting). */
function scanValue(i: i32, depth: i32): i32 {
  const c = byteAt(i);
  if (c == 0x22) return scanString(i);
  if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return scanNumber(i);
  if (c == 0x74) return scanWord(i, 0x65757274, 4); // "true"
  if (c == 0x66) return byteAt(i + 4) == 0x65 ? scanWord(i, 0x736c6166, 5) : -1; // "false"
  if (c == 0x6e) return scanWord(i, 0x6c6c756e, 4); // "null"
  if ((c != 0x7b && c != 0x5b) || depth >= MAX_DEPTH) return -1;
  const object = c == 0x7b;
  const close = object ? 0x7d : 0x5d;
  let p = skipWs(i + 1);
  if (byteAt(p) == close) return p + 1;
  while (true) {
    if (object) {
      if (byteAt(p) != 0x22) return -1;
      p = scanString(p);
      if (p < 0) return -1;
      p = skipWs(p);
      if (byteAt(p) != 0x3a) return -1;
      p = skipWs(p + 1);
    }
    p = scanValue(p, depth + 1);
    if (p < 0) return -1;
    p = skipWs(p);
    const d = byteAt(p);
    if (d == close) return p + 1;
    if (d != 0x2c) return -1;
    p = skipWs(p + 1);
  }
  return -1; // unreachable: the loop returns
}

/** true / false / null: the first four bytes compared as one little-endian u32. */
function scanWord(i: i32, firstFour: u32, length: i32): i32 {
  if (i + length > limit || load<u32>(base + <usize>i) != firstFour) return -1;
  return i + length;
}

function scanNumber(i: i32): i32 {
  let p = i;
  if (byteAt(p) == 0x2d) p++;
  if (byteAt(p) == 0x30) p++;
  else if (isDigit(byteAt(p))) while (isDigit(byteAt(p))) p++;
  else return -1;
  if (byteAt(p) == 0x2e) {
    p++;
    if (!isDigit(byteAt(p))) return -1;
    while (isDigit(byteAt(p))) p++;
  }
  const e = byteAt(p);
  if (e == 0x65 || e == 0x45) {
    p++;
    if (byteAt(p) == 0x2b || byteAt(p) == 0x2d) p++;
    if (!isDigit(byteAt(p))) return -1;
    while (isDigit(byteAt(p))) p++;
  }
  return p;
}

/** End of the string starting at the quote `i` (escapes checked, raw control characters rejected), or −1. */
function scanString(i: i32): i32 {
  if (byteAt(i) != 0x22) return -1;
  let p = i + 1;
  while (p < limit) {
    const c = <i32>load<u8>(base + <usize>p);
    if (c == 0x22) return p + 1;
    if (c < 0x20) return -1;
    if (c == 0x5c) {
      const e = byteAt(p + 1);
      if (e == 0x75) {
        for (let k = 2; k < 6; k++) if (hexValue(byteAt(p + k)) < 0) return -1;
        p += 6;
      } else if (e == 0x22 || e == 0x5c || e == 0x2f || e == 0x62 || e == 0x66 || e == 0x6e || e == 0x72 || e == 0x74) {
        p += 2;
      } else return -1;
    } else p++;
  }
  return -1;
}

/** End of the (already validated) value at `i`: strings and brackets only, no checks. */
function skipValue(i: i32): i32 {
  const c = byteAt(i);
  if (c == 0x22) return skipString(i);
  if (c != 0x7b && c != 0x5b) {
    let p = i + 1;
    while (p < limit) {
      const d = load<u8>(base + <usize>p);
      if (d == 0x2c || d == 0x7d || d == 0x5d || d == 0x20 || d == 0x0a || d == 0x0d || d == 0x09) break;
      p++;
    }
    return p;
  }
  let depth = 0;
  let p = i;
  while (p < limit) {
    const d = load<u8>(base + <usize>p);
    if (d == 0x22) {
      p = skipString(p);
      continue;
    }
    if (d == 0x7b || d == 0x5b) depth++;
    else if ((d == 0x7d || d == 0x5d) && --depth == 0) return p + 1;
    p++;
  }
  return limit;
}

function skipString(i: i32): i32 {
  let p = i + 1;
  while (p < limit) {
    const c = load<u8>(base + <usize>p);
    if (c == 0x22) return p + 1;
    p += c == 0x5c ? 2 : 1;
  }
  return limit;
}

/** True when the (valid) string at `i` holds exactly `key`'s bytes with no escapes (OpenAI field names never have any). */
function stringIs(i: i32, end: i32, key: string): bool {
  const n = key.length;
  if (end - i - 2 != n) return false;
  for (let k = 0; k < n; k++) if (<i32>load<u8>(base + <usize>(i + 1 + k)) != key.charCodeAt(k)) return false;
  return true;
}

/** One JSON document: its bytes and spans into them. Call sites use one document at a time (the globals above). */
export class Json {
  private readonly ptr: usize;

  constructor(readonly bytes: Uint8Array) {
    this.ptr = bytes.dataStart;
  }

  get length(): i32 { return this.bytes.length; }

  /** Points the scanner at this document. */
  @inline private use(): void {
    base = this.ptr;
    limit = this.bytes.length;
  }

  typeAt(i: i32): JsonType {
    this.use();
    return typeOf(i);
  }

  /** True when the whole document is one valid JSON value (surrounding whitespace allowed). */
  isValid(): bool {
    this.use();
    const end = scanValue(skipWs(0), 0);
    return end >= 0 && skipWs(end) == limit;
  }

  /** Where the document's one value starts (after leading whitespace). */
  root(): i32 {
    this.use();
    return skipWs(0);
  }

  /** The decoded text of the (valid) string at `i`, as UTF-8 bytes appended to `out`. */
  appendString(i: i32, out: Bytes): void {
    this.use();
    const end = skipString(i) - 1;
    let run = i + 1; // start of bytes copied as they are
    let p = run;
    while (p < end) {
      if (load<u8>(base + <usize>p) != 0x5c) {
        p++;
        continue;
      }
      appendRaw(run, p, out);
      const e = byteAt(p + 1);
      if (e == 0x75) {
        let code = hex4(p + 2);
        p += 6;
        // a surrogate pair written as two escapes is one code point
        if (code >= 0xd800 && code < 0xdc00 && byteAt(p) == 0x5c && byteAt(p + 1) == 0x75) {
          const low = hex4(p + 2);
          if (low >= 0xdc00 && low < 0xe000) {
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            p += 6;
          }
        }
        // a lone surrogate becomes U+FFFD, as TextEncoder writes it
        if (code >= 0xd800 && code < 0xe000) code = 0xfffd;
        appendUtf8(code, out);
      } else {
        out.push(<u8>(e == 0x62 ? 0x08 : e == 0x66 ? 0x0c : e == 0x6e ? 0x0a : e == 0x72 ? 0x0d : e == 0x74 ? 0x09 : e));
        p += 2;
      }
      run = p;
    }
    appendRaw(run, end, out);
  }

  /** The decoded string at `i` as an AssemblyScript string (configuration values, error messages). */
  stringAt(i: i32): string {
    const out = new Bytes();
    this.appendString(i, out);
    return String.UTF8.decode(out.toUint8Array().buffer);
  }

  /** The number at `i` (valid JSON number). */
  numberAt(i: i32): f64 {
    this.use();
    const end = scanNumber(i);
    if (end < 0) return NaN;
    // plain integers of up to 15 digits (token ids, max_tokens) exactly, without a string
    const negative = byteAt(i) == 0x2d;
    const from = negative ? i + 1 : i;
    if (end - from <= 15) {
      let v: f64 = 0;
      let p = from;
      while (p < end && isDigit(byteAt(p))) v = v * 10 + <f64>(byteAt(p++) - 0x30);
      if (p == end) return negative ? -v : v;
    }
    return parseFloat(String.UTF8.decode(this.bytes.slice(i, end).buffer));
  }

  /** The members of the (valid) object at `i`: key span and value span, in document order. */
  members(i: i32): Array<Member> {
    this.use();
    const out = new Array<Member>();
    let p = skipWs(i + 1);
    if (byteAt(p) == 0x7d) return out;
    while (p < limit) {
      const keyEnd = skipString(p);
      const v = skipWs(skipWs(keyEnd) + 1);
      const end = skipValue(v);
      out.push(new Member(this, p, keyEnd, v, end));
      p = skipWs(end);
      if (byteAt(p) != 0x2c) break;
      p = skipWs(p + 1);
    }
    return out;
  }

  /** The items of the (valid) array at `i`, as value spans. */
  items(i: i32): Array<Span> {
    this.use();
    const out = new Array<Span>();
    let p = skipWs(i + 1);
    if (byteAt(p) == 0x5d) return out;
    while (p < limit) {
      const end = skipValue(p);
      out.push(new Span(p, end));
      p = skipWs(end);
      if (byteAt(p) != 0x2c) break;
      p = skipWs(p + 1);
    }
    return out;
  }

  /** True when the (valid) string at [start, end) is `key` (plain bytes; an escaped name is decoded first). */
  stringEquals(start: i32, end: i32, key: string): bool {
    this.use();
    for (let p = start + 1; p < end - 1; p++) {
      if (load<u8>(base + <usize>p) == 0x5c) return this.stringAt(start) == key;
    }
    return stringIs(start, end, key);
  }

  /** Appends the bytes [start, end) with the whitespace between tokens removed (strings copied as they are). */
  appendCompact(start: i32, end: i32, out: Bytes): void {
    this.use();
    let inString = false;
    for (let p = start; p < end; p++) {
      const c = load<u8>(base + <usize>p);
      if (inString) {
        out.push(c);
        if (c == 0x5c && p + 1 < end) out.push(load<u8>(base + <usize>(++p)));
        else if (c == 0x22) inString = false;
      } else if (c == 0x22) {
        inString = true;
        out.push(c);
      } else if (c != 0x20 && c != 0x0a && c != 0x0d && c != 0x09) out.push(c);
    }
  }
}

function appendRaw(from: i32, to: i32, out: Bytes): void {
  if (to > from) out.append(base + <usize>from, to - from);
}

function hex4(p: i32): i32 {
  return (hexValue(byteAt(p)) << 12) | (hexValue(byteAt(p + 1)) << 8) | (hexValue(byteAt(p + 2)) << 4) | hexValue(byteAt(p + 3));
}

export class Span {
  constructor(readonly start: i32, readonly end: i32) {}
}

/** An object member: its key's span (with the quotes) and its value's span. */
export class Member {
  constructor(readonly json: Json, readonly keyStart: i32, readonly keyEnd: i32, readonly start: i32, readonly end: i32) {}

  is(key: string): bool { return this.json.stringEquals(this.keyStart, this.keyEnd, key); }

  /** The decoded key (when it has to be shown or re-written). */
  get key(): string { return this.json.stringAt(this.keyStart); }
}

/** The last member named `key` (JSON.parse keeps the last of duplicate keys), or null. */
export function memberNamed(members: Array<Member>, key: string): Member | null {
  for (let k = members.length - 1; k >= 0; k--) if (unchecked(members[k]).is(key)) return unchecked(members[k]);
  return null;
}

/** A growing byte string (what the filter writes: prompt text, request bodies), appended to in runs. */
export class Bytes {
  private buf: Uint8Array = new Uint8Array(256);
  length: i32 = 0;

  get dataStart(): usize { return this.buf.dataStart; }

  push(b: u8): void {
    if (this.length == this.buf.length) this.grow(1);
    store<u8>(this.buf.dataStart + <usize>this.length, b);
    this.length++;
  }

  append(src: usize, n: i32): void {
    if (n <= 0) return;
    if (this.length + n > this.buf.length) this.grow(n);
    memory.copy(this.buf.dataStart + <usize>this.length, src, <usize>n);
    this.length += n;
  }

  toUint8Array(): Uint8Array {
    return this.buf.slice(0, this.length);
  }

  private grow(n: i32): void {
    const next = new Uint8Array(max(this.buf.length * 2, this.length + n));
    memory.copy(next.dataStart, this.buf.dataStart, <usize>this.length);
    this.buf = next;
  }
}

export function appendAscii(s: string, out: Bytes): void {
  appendText(s, out);
}

export function appendText(s: string, out: Bytes): void {
  const b = String.UTF8.encode(s);
  out.append(changetype<usize>(b), b.byteLength);
}

/** A JSON string literal for `s` (quotes and the escapes JSON.stringify writes). */
export function appendQuoted(s: string, out: Bytes): void {
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

function appendUtf8(code: i32, out: Bytes): void {
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
