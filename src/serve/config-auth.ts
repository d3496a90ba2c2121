// The `auth` section of the `dolphin serve` configuration: who may call the inference endpoints (a file of client API
// keys, proxy/client-keys.ts) and the default per-key limits. Absent or with `keys_file: null`, anyone may call, as
// before. docs/serving.md "Client keys".

import { isAbsolute, resolve } from "node:path";
import { ConfigError, numbersIn, section, string } from "./config-values.js";

export interface AuthConfig {
  /** A JSON file of client keys (or their SHA-256), made absolute; null: no keys asked for. */
  keys_file: string | null;
  /** How often the keys file is checked for a change (its mtime, size and inode). */
  reload_interval_s: number;
  /** A key's default limits, per second (0: none); a key in the file may set its own. */
  requests_per_s: number;
  tokens_per_s: number;
  /** A key may spend this many seconds of its rates at once (a burst), at least one request. */
  burst_s: number;
  /** With keys: the Authorization sent to the workers ("Bearer …"); null sends none (the client's key stays here). */
  worker_api_key: string | null;
}

export const AUTH_DEFAULTS: AuthConfig = {
  keys_file: null,
  reload_interval_s: 2,
  requests_per_s: 0,
  tokens_per_s: 0,
  burst_s: 1,
  worker_api_key: null,
};

const AUTH_KEYS = Object.keys(AUTH_DEFAULTS);

/** The config's `auth` (absent or null: the defaults); a relative keys_file is resolved against `baseDir`. */
export function parseAuth(v: unknown, baseDir: string): AuthConfig {
  const o = section(v, "auth", AUTH_KEYS);
  const n = numbersIn(o, "auth", AUTH_DEFAULTS);
  const file =
    o["keys_file"] === undefined || o["keys_file"] === null ? null : string(o["keys_file"], "auth.keys_file");
  const workerKey =
    o["worker_api_key"] === undefined || o["worker_api_key"] === null
      ? null
      : string(o["worker_api_key"], "auth.worker_api_key");
  const auth: AuthConfig = {
    keys_file: file === null ? null : isAbsolute(file) ? file : resolve(baseDir, file),
    reload_interval_s: n("reload_interval_s", { min: 0.05, max: 3600 }),
    requests_per_s: n("requests_per_s", { min: 0, max: 1e9 }),
    tokens_per_s: n("tokens_per_s", { min: 0, max: 1e12 }),
    burst_s: n("burst_s", { min: 0, exclusiveMin: true, max: 3600 }),
    worker_api_key: workerKey,
  };
  if (auth.keys_file === null && auth.worker_api_key !== null)
    throw new ConfigError(
      "auth.worker_api_key",
      "needs auth.keys_file (without keys the client's Authorization is passed on)",
    );
  return auth;
}
