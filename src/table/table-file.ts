// A table file read from disk (Node only): the CLI's and the simulator's runs read tables through here, so every error
// names the file. The rest of src/table/ (the format) stays browser-safe.
import { readFileSync } from "node:fs";
import { decodeTable } from "./codec.js";
import type { Table } from "./table.js";

/** Why a file could not be read, in words (the errno code otherwise). */
export function readFailure(e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES") return "permission denied";
  if (code === "EISDIR") return "it is a directory";
  return (e as Error).message;
}

/** A table file, read and validated (checksum included); every error names the file. */
export function readTableFile(path: string): Table {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (e) {
    throw new Error(`cannot read table file ${path}: ${readFailure(e)}`, { cause: e });
  }
  try {
    return decodeTable(bytes);
  } catch (e) {
    // the decoder names the field it rejects; "(bytes)" (the whole input) is better said by the file's name
    throw new Error(`${path}: ${(e as Error).message.replace(/^table: \(bytes\): /, "")}`, { cause: e });
  }
}
