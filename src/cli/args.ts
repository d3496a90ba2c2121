// What every command shares: the command shape, usage errors, integer options, stdin, progress lines, and the
// one place a library error gets the name of the flag that caused it. Kept free of heavy imports: the dispatcher
// loads this module for every command, `dolphin hash` included.

import { readFileSync } from "node:fs";
import type { ParseArgsConfig } from "node:util";

export type Options = NonNullable<ParseArgsConfig["options"]>;
export type Values = Record<string, string | boolean | undefined>;

/** One subcommand: its --help text, its flags, and what it does. Its one-line summary lives in the dispatcher. */
export interface Command {
  usage: string;
  options: Options;
  run(values: Values, positionals: string[]): Promise<number>;
}

/** Bad command-line input: the dispatcher prints the message and the command's usage, and exits 2. */
export class UsageError extends Error {}

/**
 * Runs a library parser on the value of --`name`. Library code says what is wrong with a value and never names a
 * flag (it is called from configs, the proxy and tests too); here its error gets the flag's name in front. It stays
 * an ordinary error (exit 1, no usage text): the command line was well formed, the value was not accepted.
 */
export function flag<T>(name: string, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    throw new Error(`--${name}: ${(e as Error).message}`, { cause: e });
  }
}

export function intOption(v: unknown, name: string, min: number, max: number, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new UsageError(`--${name} must be an integer in ${min}–${max}, got ${String(v)}`);
  return n;
}

export function readStdin(): string {
  try {
    return readFileSync(0, "utf8");
  } catch {
    return "";
  }
}

/** Progress on stderr: one rewritten line on a terminal, a line per step otherwise (logs, CI). */
export function progress(line: string, done: boolean): void {
  if (process.stderr.isTTY) process.stderr.write(`\r\x1b[2K${line}${done ? "\n" : ""}`);
  else if (done || !line.startsWith("  round")) process.stderr.write(line + "\n");
}

/** Runs until SIGINT or SIGTERM, then closes (the long-running servers: serve, worker). */
export function untilSignal(close: () => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => void close().then(resolve);
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
}

/**
 * A help sentence whose words are generated (names from spec/abi.json), wrapped greedily at the 120 columns the
 * hand-wrapped help texts keep, so a new name lands on the right line.
 */
export function wrapHelp(text: string, width = 120): string {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  return [...lines, line].join("\n");
}
