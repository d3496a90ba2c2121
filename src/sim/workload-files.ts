// Workload files (Node): reads a trace or lengths file and hands its text to the browser-safe parsers in
// traces.ts; loadWorkload takes a generator name or a file path, as the command line does.

import { readFileSync, statSync } from "node:fs";
import type { Workload } from "./types.js";
import { generate } from "./generators.js";
import { parseAzure, parseLengths, parseMooncake, parseWorkload } from "./traces.js";
import { GENERATORS, WorkloadError, isGenerator, type WorkloadFormat, type WorkloadOptions } from "./workload.js";

// Error messages, in one place (the parsers' own are in workload.ts).
const msg = {
  unknownWorkload: (s: string) => `workload "${s}": not a generator (${GENERATORS.join(", ")}) and no such file`,
  unreadable: (file: string, why: string) => `${file}: cannot read: ${why}`,
};

/** A file's text as UTF-8, without a byte-order mark; a file that cannot be read is a WorkloadError. */
function readText(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new WorkloadError(msg.unreadable(file, e.code === "ENOENT" ? "no such file" : e.message));
  }
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text; // drop a UTF-8 byte-order mark
}

export function readMooncake(path: string, opts: WorkloadOptions = {}): Workload {
  return parseMooncake(readText(path), path, opts);
}

export function readAzure(path: string, opts: WorkloadOptions = {}): Workload {
  return parseAzure(readText(path), path, opts);
}

export function readLengths(path: string, opts: WorkloadOptions = {}): Workload {
  return parseLengths(readText(path), path, opts);
}

/**
 * A workload by generator name (hybrid, arxiv, leval, humaneval, multiturn) or file path. With format "auto", a
 * generator name wins over a file of the same name, and a file's format is told from its first line.
 */
export function loadWorkload(
  nameOrFile: string,
  format: WorkloadFormat = "auto",
  opts: WorkloadOptions = {},
): Workload {
  if (format === "auto" && isGenerator(nameOrFile)) return generate(nameOrFile, opts);
  let isFile = false;
  try {
    isFile = statSync(nameOrFile).isFile();
  } catch {
    // no such path: reported below
  }
  if (!isFile) throw new WorkloadError(msg.unknownWorkload(nameOrFile));
  return parseWorkload(readText(nameOrFile), nameOrFile, format, opts);
}
