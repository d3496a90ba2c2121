// Reading `dolphin serve`'s files from disk: the config file (JSON, then parseConfig) and the table it names (a
// rule kind with its defaults, or a msgpack table file). Errors name the file and the field.

import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { decodeTable } from "../table/codec.js";
import { ruleTable } from "../table/rule-table.js";
import { POLICY_KINDS, type PolicyKind, type Table } from "../table/table.js";
import { readFailure } from "../table/table-file.js";
import { parseConfig, type ServeConfig } from "./config.js";
import { ConfigError } from "./config-values.js";

/** Reads and validates a config file (JSON). Errors name the file and the field. */
export function loadConfig(path: string): ServeConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new ConfigError("(file)", `cannot read config file ${path}: ${readFailure(e)}`);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new ConfigError("(file)", `${path} is not JSON: ${(e as Error).message}`);
  }
  return parseConfig(raw, dirname(resolve(path)));
}

/** The table the config names: a rule kind with its defaults, or a msgpack file (validated, checksum checked). */
export function loadConfigTable(config: Pick<ServeConfig, "table">): Table {
  const spec = config.table;
  if ((POLICY_KINDS as readonly string[]).includes(spec)) {
    const kind = spec as PolicyKind;
    if (kind === "kmeans" || kind === "gmm")
      throw new ConfigError(
        "table",
        `"${kind}" tables are learned: give the path of a table file (dolphin train --out …)`,
      );
    try {
      return ruleTable(kind);
    } catch (e) {
      throw new ConfigError(
        "table",
        `rule "${kind}" has required parameters, give a table file instead (${(e as Error).message})`,
      );
    }
  }
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(spec);
  } catch (e) {
    throw new ConfigError("table", `cannot read table file ${spec}: ${readFailure(e)}`);
  }
  try {
    return decodeTable(bytes);
  } catch (e) {
    throw new ConfigError("table", `${spec}: ${(e as Error).message}`);
  }
}
