// `dolphin table`: decode and validate a table file (checksum included) and describe it.

import { readTableFile } from "../table/table-file.js";
import { describeTable } from "../table/describe-table.js";
import { UsageError, type Command } from "./args.js";

export const command: Command = {
  usage: "dolphin table <file> [--json]",
  options: { json: { type: "boolean" } },
  async run(v, pos) {
    if (!pos[0]) throw new UsageError("which table file?");
    const t = readTableFile(pos[0]);
    process.stdout.write((v["json"] ? JSON.stringify(t, null, 2) : describeTable(t)) + "\n");
    return 0;
  },
};
