// A file's stamp for noticing that it changed (the keys file, proxy/client-keys.ts; the table file,
// proxy/table-watch.ts): its mtime, size and inode, so that an edit in place and a rename over it both count.

import { statSync } from "node:fs";
import { stat } from "node:fs/promises";

type Stats = { mtimeMs: number; size: number; ino: number };

const stampOf = (s: Stats): string => `${s.mtimeMs}:${s.size}:${s.ino}`;

export async function fileStamp(path: string): Promise<string> {
  return stampOf(await stat(path));
}

export function fileStampSync(path: string): string {
  return stampOf(statSync(path));
}
