// Who may call: the client API keys of `auth.keys_file` (config-auth.ts), checked on every /v1/* request before
// anything else is done for it (no body read, no /tokenize, no worker call), and each key's limits on requests and
// tokens per second. The file holds keys or their SHA-256 and is read again when it changes; a file that no longer
// parses leaves the keys in force as they were (logged, counted). docs/serving.md "Client keys".
//
// Keys are compared as SHA-256 digests: the presented key's digest is looked up, then compared with the stored one by
// crypto.timingSafeEqual. The lookup's timing depends on the digest only, and a digest's prefix tells nothing about a
// key's bytes, so no time measured brings a caller closer to a stored key.
//
// Limits are token buckets refilled continuously, holding `burst_s` seconds of the rate (at least one request). A
// request takes one request at once; its tokens (the prompt as routed, then the completion the worker reports) are
// charged as they become known, so a bucket may go into debt; a key in debt is refused until the debt is paid back.

import { createHash, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { fileStamp, fileStampSync } from "../file-stamp.js";
import type { AuthConfig } from "../config-auth.js";
import { ConfigError, number, object, onlyKeys, string } from "../config-values.js";
import { HttpError } from "../http-toolkit.js";
import { HotCounter, scrapedGauge, Counter, type Registry } from "../prometheus.js";
import type { Logger } from "./log.js";
import type { Caller as RequestCaller, RequestContext } from "./request-context.js";

/** A key's name: what logs and metrics show in its place. */
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
/** Shortest plain key accepted: a shorter one could be guessed. */
const MIN_KEY_CHARS = 16;

export interface KeyEntry {
  name: string;
  digest: Buffer;
  /** Its own limits, or null for the config's defaults. */
  requestsPerS: number | null;
  tokensPerS: number | null;
}

/** The keys of a keys file's text; errors name the file, the entry and the field. */
export function parseKeysFile(text: string, path: string): KeyEntry[] {
  try {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw new ConfigError("(file)", `not JSON: ${(e as Error).message}`);
    }
    const o = object(raw, "(top level)");
    onlyKeys(o, "", ["keys"]);
    if (!Array.isArray(o["keys"])) throw new ConfigError("keys", "expected an array of {name, key | sha256}");
    const names = new Set<string>();
    const digests = new Set<string>();
    return o["keys"].map((v, i) => {
      const at = `keys[${i}]`;
      const k = object(v, at);
      onlyKeys(k, at, ["name", "key", "sha256", "requests_per_s", "tokens_per_s"]);
      const name = string(k["name"], `${at}.name`);
      if (!NAME.test(name)) throw new ConfigError(`${at}.name`, `expected 1–64 of A–Z a–z 0–9 _ . -, got "${name}"`);
      if (names.has(name)) throw new ConfigError(`${at}.name`, `duplicate name "${name}"`);
      names.add(name);
      if ((k["key"] === undefined) === (k["sha256"] === undefined))
        throw new ConfigError(at, "give exactly one of key and sha256");
      let digest: Buffer;
      if (k["key"] !== undefined) {
        const key = string(k["key"], `${at}.key`);
        if (key.length < MIN_KEY_CHARS || /\s/.test(key))
          throw new ConfigError(`${at}.key`, `expected at least ${MIN_KEY_CHARS} characters without spaces`);
        digest = sha256(key);
      } else {
        const hex = string(k["sha256"], `${at}.sha256`);
        if (!/^[0-9a-fA-F]{64}$/.test(hex))
          throw new ConfigError(`${at}.sha256`, "expected 64 hex digits (sha256sum of the key)");
        digest = Buffer.from(hex, "hex");
      }
      const hex = digest.toString("hex");
      if (digests.has(hex)) throw new ConfigError(at, `the same key as an earlier entry`);
      digests.add(hex);
      const limit = (field: string): number | null =>
        k[field] === undefined ? null : number(k[field], `${at}.${field}`, 0, { min: 0, max: 1e12 });
      return { name, digest, requestsPerS: limit("requests_per_s"), tokensPerS: limit("tokens_per_s") };
    });
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    const problem = e.message.slice(`config: ${e.field}: `.length);
    throw new ConfigError("auth.keys_file", `${path}: ${e.field}: ${problem}`);
  }
}

function sha256(s: string): Buffer {
  return createHash("sha256").update(s, "utf8").digest();
}

/** A rate and what is left of it: `level` units, at most `capacity`, refilled at `rate` a second; below 0 is debt. */
class Bucket {
  level: number;
  private lastS = performance.now() / 1000;
  constructor(
    public rate: number,
    public capacity: number,
  ) {
    this.level = capacity;
  }
  refill(): number {
    const now = performance.now() / 1000;
    this.level = Math.min(this.capacity, this.level + (now - this.lastS) * this.rate);
    this.lastS = now;
    return this.level;
  }
  /** Whole seconds until the level reaches `need` (at least 1). */
  waitS(need: number): number {
    return Math.max(1, Math.ceil((need - this.level) / this.rate));
  }
}

/** A caller the keys let in: its name, and its token bucket for charging what its request turns out to cost. */
export class Caller implements RequestCaller {
  requests: Bucket | null = null;
  tokens: Bucket | null = null;
  constructor(
    readonly name: string,
    private readonly counted: HotCounter,
  ) {}
  /** Tokens this caller's request spent (its prompt as routed, its completion as reported). */
  charge(tokens: number): void {
    if (!(tokens > 0)) return;
    this.tokens?.refill();
    if (this.tokens) this.tokens.level -= tokens;
    this.counted.at(this.name).inc(tokens);
  }
}

type Refusal = "missing" | "unknown";

export class ClientKeys {
  private byDigest = new Map<string, { entry: KeyEntry; caller: Caller }>();
  private readonly callers = new Map<string, Caller>();
  private fileStamp = "";
  private timer: NodeJS.Timeout | null = null;
  private readonly requestsCounted: HotCounter;
  private readonly tokensCounted: HotCounter;
  private readonly refused: Counter;
  private readonly reloads: Counter;

  constructor(
    private readonly config: AuthConfig & { keys_file: string },
    registry: Registry,
    private readonly log: Logger,
  ) {
    this.requestsCounted = new HotCounter(
      registry,
      "dolphin_client_requests_total",
      "Requests on /v1/* by client key name and outcome (admitted; limited_requests, limited_tokens: answered 429)",
      ["key", "outcome"],
    );
    this.tokensCounted = new HotCounter(
      registry,
      "dolphin_client_tokens_total",
      "Tokens charged to each client key (prompt tokens as routed, completion tokens as the worker reported)",
      ["key"],
    );
    this.refused = new Counter({
      name: "dolphin_auth_failures_total",
      help: "Requests on /v1/* answered 401, by reason (missing: no bearer key; unknown: a key not in the keys file)",
      labelNames: ["reason"],
      registers: [registry],
    });
    this.reloads = new Counter({
      name: "dolphin_client_keys_reloads_total",
      help: "Reads of the keys file after it changed, by outcome (ok; failed: the keys in force were kept)",
      labelNames: ["outcome"],
      registers: [registry],
    });
    scrapedGauge(registry, "dolphin_client_keys", "Client keys in force", [], () => [[{}, this.byDigest.size]]);
    // at start a file that cannot be read or parsed is a config error: the proxy does not start
    const path = config.keys_file;
    let text: string;
    try {
      text = readFileSync(path, "utf8");
      this.fileStamp = fileStampSync(path);
    } catch (e) {
      throw new ConfigError("auth.keys_file", `cannot read ${path}: ${(e as Error).message}`);
    }
    this.install(parseKeysFile(text, path));
  }

  /** Checks the keys file every reload_interval_s from now on. */
  watch(): void {
    this.timer = setInterval(() => void this.reload(), this.config.reload_interval_s * 1000);
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Reads the keys file again if it changed; true when new keys were put in force. */
  async reload(): Promise<boolean> {
    const path = this.config.keys_file;
    try {
      const stamp = await fileStamp(path);
      if (stamp === this.fileStamp) return false;
      const keys = parseKeysFile(await readFile(path, "utf8"), path);
      this.fileStamp = stamp;
      this.install(keys);
      this.reloads.inc({ outcome: "ok" });
      this.log.log("info", "client keys reloaded", { file: path, keys: keys.length });
      return true;
    } catch (e) {
      this.reloads.inc({ outcome: "failed" });
      this.log.log("error", "client keys file unreadable, keeping the keys in force", {
        file: path,
        error: (e as Error).message,
      });
      return false;
    }
  }

  /**
   * Lets the request in (its caller set on `ctx`, one request taken from its bucket), or throws its 401 or 429. Runs
   * before anything else is done for the request.
   */
  admit(ctx: RequestContext): void {
    const header = ctx.req.headers["authorization"];
    const m = typeof header === "string" ? /^Bearer +(\S+)\s*$/i.exec(header) : null;
    if (!m) throw this.refuse("missing");
    const digest = sha256(m[1]!);
    const found = this.byDigest.get(digest.toString("hex"));
    if (!found || !timingSafeEqual(found.entry.digest, digest)) throw this.refuse("unknown");
    const { caller } = found;
    const r = caller.requests;
    if (r && r.refill() < 1) throw this.limited(caller, "requests", r.waitS(1));
    const t = caller.tokens;
    if (t && t.refill() <= 0) throw this.limited(caller, "tokens", t.waitS(Math.min(1, t.capacity)));
    if (r) r.level -= 1;
    this.requestsCounted.at(caller.name, "admitted").inc();
    ctx.caller = caller;
    ctx.workerAuthorization = this.config.worker_api_key === null ? null : `Bearer ${this.config.worker_api_key}`;
    ctx.afterClose.push(() => caller.charge(ctx.completionTokens ?? 0));
  }

  private refuse(reason: Refusal): HttpError {
    this.refused.inc({ reason });
    const err =
      reason === "missing"
        ? new HttpError(
            401,
            "no API key given: send it as Authorization: Bearer <key>",
            "invalid_request_error",
            "missing_api_key",
            null,
          )
        : new HttpError(401, "incorrect API key provided", "invalid_request_error", "invalid_api_key", null);
    err.headers = { "www-authenticate": "Bearer" };
    return err;
  }

  private limited(caller: Caller, what: "requests" | "tokens", retryAfterS: number): HttpError {
    this.requestsCounted.at(caller.name, `limited_${what}`).inc();
    const err = new HttpError(
      429,
      `rate limit reached for ${what} on key ${caller.name}; retry after ${retryAfterS} s`,
      what,
      "rate_limit_exceeded",
      null,
    );
    err.headers = { "retry-after": String(retryAfterS) };
    return err;
  }

  /** The keys in force from now on; a caller whose name stays keeps its buckets (their rates as the file says now). */
  private install(keys: KeyEntry[]): void {
    const a = this.config;
    const byDigest = new Map<string, { entry: KeyEntry; caller: Caller }>();
    for (const entry of keys) {
      let caller = this.callers.get(entry.name);
      if (!caller) this.callers.set(entry.name, (caller = new Caller(entry.name, this.tokensCounted)));
      const rps = entry.requestsPerS ?? a.requests_per_s;
      const tps = entry.tokensPerS ?? a.tokens_per_s;
      caller.requests = rateBucket(caller.requests, rps, Math.max(1, rps * a.burst_s));
      caller.tokens = rateBucket(caller.tokens, tps, tps * a.burst_s);
      byDigest.set(entry.digest.toString("hex"), { entry, caller });
    }
    for (const name of [...this.callers.keys()]) if (!keys.some((k) => k.name === name)) this.callers.delete(name);
    this.byDigest = byDigest;
  }
}

/** The bucket of a rate (null for 0: no limit), the old one kept with its level when there was one. */
function rateBucket(old: Bucket | null, rate: number, capacity: number): Bucket | null {
  if (rate === 0) return null;
  if (!old) return new Bucket(rate, capacity);
  old.refill();
  old.rate = rate;
  old.capacity = capacity;
  old.level = Math.min(old.level, capacity);
  return old;
}
