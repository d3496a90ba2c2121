// The proxy's structured log: one JSON object a line, at or above the config's log_level.

import type { LogLevel } from "../config.js";

export const LEVELS: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export class Logger {
  constructor(
    private readonly level: LogLevel,
    private readonly sink: (line: string) => void,
  ) {}
  enabled(level: Exclude<LogLevel, "silent">): boolean {
    return LEVELS[level] >= LEVELS[this.level];
  }
  log(level: Exclude<LogLevel, "silent">, msg: string, fields: Record<string, unknown> = {}): void {
    if (this.enabled(level)) this.sink(JSON.stringify({ ts: new Date().toISOString(), level, msg, ...fields }));
  }
}
