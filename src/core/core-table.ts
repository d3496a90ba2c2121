// Loading a table file through the core's own decoder (assembly/table/): the host writes the msgpack bytes into the
// input buffer and calls `loadTable`; the core reads, validates, checksums and stages it, and makes it active. On
// a bad table the core fills an error record (a problem code from spec/abi.json table_problems, the field path, the
// values the message needs) and this module turns it into the same TableError src/table/codec.ts decodeTable throws:
// "table: <field>: <problem>", from the generated TABLE_PROBLEMS templates. Other hosts do the same with their
// own generated copy of the templates; none needs a msgpack decoder of its own. Browser-safe (no Node imports).

import { CoreError } from "../contract/errors.js";
import {
  ErrorCode,
  FEATURES,
  KINDS,
  OSL_CLASS_SLOTS,
  OSL_FEATURES,
  OslClassSlot,
  TABLE_ERROR_SLOTS,
  TABLE_INFO_SLOTS,
  TABLE_PROBLEMS,
  TABLE_VALUE_TYPES,
  TableErrorSlot,
  TableInfoSlot,
} from "../generated/abi.js";
import { TableError } from "../table/table.js";

/** The exports `loadTableInCore` needs from a core instance. */
export interface TableCoreExports {
  memory: WebAssembly.Memory;
  inputPtr(): number;
  inputCapacity(): number;
  errorDetail(): number;
  loadTable(len: number): number;
  tableErrorPtr(): number;
  tableErrorPathPtr(): number;
  tableInfoPtr(): number;
  tableOslClassesPtr(): number;
}

/** What the core reports about a table it made active (the table info record, strings sliced from the bytes). */
export interface CoreTableInfo {
  kind: string;
  kindCode: number;
  k: number;
  dims: number;
  features: string[];
  remoteBits: number;
  cells: number;
  oslClasses: number;
  /** The output-length classes' names and representative lengths (the class records), empty when none. */
  oslClassNames: string[];
  oslClassRepresentative: number[];
  oslModelFeatures: number;
  stagedLength: number;
  oslAt: number;
  slo: { ttft_ms: number; tpot_ms: number } | null;
  seed: number;
  checksum: string;
  split: string | null;
  provenance: { tool: string; created: string; workload: string; notes?: string };
}

const UTF8 = new TextDecoder();

/**
 * Loads `bytes` (a table file) into the core and makes it active. Throws TableError (the message src/table/codec.ts
 * decodeTable gives) when the core rejects the table, CoreError for other core errors (e.g. bytes larger than
 * the input buffer). The active table is unchanged when it throws.
 */
export function loadTableInCore(x: TableCoreExports, bytes: Uint8Array): CoreTableInfo {
  if (bytes.length > x.inputCapacity()) {
    throw new CoreError(ErrorCode.INPUT_TOO_LARGE, bytes.length, "loadTable");
  }
  new Uint8Array(x.memory.buffer, x.inputPtr(), bytes.length).set(bytes);
  const rc = x.loadTable(bytes.length);
  if (rc === ErrorCode.BAD_TABLE) throw tableErrorFromCore(x, bytes);
  if (rc !== ErrorCode.OK) throw new CoreError(rc, x.errorDetail(), "loadTable");
  return readTableInfo(x, bytes);
}

/** The TableError the core's error record describes; `bytes` are the table bytes it was given. */
export function tableErrorFromCore(x: TableCoreExports, bytes: Uint8Array): TableError {
  const record = new Float64Array(x.memory.buffer, x.tableErrorPtr(), TABLE_ERROR_SLOTS).slice();
  const pathBytes = new Uint8Array(x.memory.buffer, x.tableErrorPathPtr(), record[TableErrorSlot.pathLength]!);
  let field = UTF8.decode(pathBytes);
  if (record[TableErrorSlot.pathTruncated] === 1) field += "…";
  return new TableError(field, tableProblemText(record, bytes));
}

function stringAt(bytes: Uint8Array, at: number, length: number): string {
  return UTF8.decode(bytes.subarray(at, at + length));
}

function integer64(bytes: Uint8Array, at: number, signed: boolean): bigint {
  const view = new DataView(bytes.buffer, bytes.byteOffset + at, 8);
  return signed ? view.getBigInt64(0) : view.getBigUint64(0);
}

/** The offending value in words, as src/table/fields.ts's describe() writes it. */
export function describeTableValue(record: Float64Array, bytes: Uint8Array): string {
  const n = record[TableErrorSlot.valueNumber]!;
  const at = record[TableErrorSlot.valueAt]!;
  switch (TABLE_VALUE_TYPES[record[TableErrorSlot.valueType]!]) {
    case "nil":
      return "null";
    case "boolean":
      return n === 1 ? "true" : "false";
    case "number":
      return String(n);
    case "string": {
      const s = stringAt(bytes, at, record[TableErrorSlot.valueLength]!);
      return `the string ${JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…` : s)}`;
    }
    case "array":
      return `an array of ${n}`;
    case "map":
      return "a map";
    case "integer64":
      return `the integer ${integer64(bytes, at, n === 1)}`;
    case "bin":
      return `binary data (${n} bytes)`;
    case "map_object":
      return "a Map object";
    case "undefined":
      return "nothing";
    case "object":
      return "a map";
    default:
      return "nothing";
  }
}

/** The problem text of an error record: its TABLE_PROBLEMS template with the record's values filled in. */
export function tableProblemText(record: Float64Array, bytes: Uint8Array): string {
  const problem = TABLE_PROBLEMS[record[TableErrorSlot.problem]!];
  if (!problem) return `unknown problem ${record[TableErrorSlot.problem]} (a core newer than this host?)`;
  const missing = TABLE_VALUE_TYPES[record[TableErrorSlot.valueType]!] === "missing";
  const template = missing && problem.missing ? problem.missing : problem.message;
  const kind = KINDS.find((k) => k.code === record[TableErrorSlot.kind]);
  const text = () => stringAt(bytes, record[TableErrorSlot.valueAt]!, record[TableErrorSlot.valueLength]!);
  const hash = () => {
    const hi = record[TableErrorSlot.hashHi]!.toString(16).padStart(8, "0");
    return `xxh64:${hi}${record[TableErrorSlot.hashLo]!.toString(16).padStart(8, "0")}`;
  };
  const values: Record<string, () => string> = {
    got: () => describeTableValue(record, bytes),
    got_integer: () =>
      String(integer64(bytes, record[TableErrorSlot.valueAt]!, record[TableErrorSlot.valueNumber] === 1)),
    value: () => String(record[TableErrorSlot.valueNumber]),
    previous: () => String(record[TableErrorSlot.previous]),
    expected: () => String(record[TableErrorSlot.expected]),
    limit: () => String(record[TableErrorSlot.limit]),
    count: () => String(record[TableErrorSlot.count]),
    length: () => String(record[TableErrorSlot.length]),
    kind: () => kind?.name ?? "?",
    kinds: () => KINDS.map((k) => k.name).join(", "),
    params: () => kind?.params.map((p) => p.name).join(", ") || "none",
    features: () => FEATURES.join(", "),
    osl_features: () => OSL_FEATURES.join(", "),
    string: text,
    json: () => JSON.stringify(text()),
    actual: hash,
  };
  return template.replace(/\{([a-z_]+)\}/g, (whole, name: string) => values[name]?.() ?? whole);
}

/** The info record of the table the core just made active. */
export function readTableInfo(x: TableCoreExports, bytes: Uint8Array): CoreTableInfo {
  const r = new Float64Array(x.memory.buffer, x.tableInfoPtr(), TABLE_INFO_SLOTS).slice();
  const slot = (name: keyof typeof TableInfoSlot): number => r[TableInfoSlot[name]]!;
  const str = (at: keyof typeof TableInfoSlot, length: keyof typeof TableInfoSlot): string | null =>
    slot(at) < 0 ? null : stringAt(bytes, slot(at), slot(length));
  const kindCode = slot("kind");
  const features: string[] = [];
  for (const name of ["feature0", "feature1", "feature2", "feature3"] as const) {
    if (slot(name) >= 0) features.push(FEATURES[slot(name)]!);
  }
  const notes = str("notesAt", "notesLength");
  const classes = new Float64Array(x.memory.buffer, x.tableOslClassesPtr(), slot("oslClasses") * OSL_CLASS_SLOTS);
  const classSlot = (i: number, name: keyof typeof OslClassSlot): number =>
    classes[i * OSL_CLASS_SLOTS + OslClassSlot[name]]!;
  const oslClassNames: string[] = [];
  const oslClassRepresentative: number[] = [];
  for (let i = 0; i < slot("oslClasses"); i++) {
    oslClassNames.push(stringAt(bytes, classSlot(i, "nameAt"), classSlot(i, "nameLength")));
    oslClassRepresentative.push(classSlot(i, "representative"));
  }
  const hex = (v: number) => v.toString(16).padStart(8, "0");
  return {
    kind: KINDS.find((k) => k.code === kindCode)?.name ?? "?",
    kindCode,
    k: slot("k"),
    dims: slot("dims"),
    features,
    remoteBits: slot("remoteBits"),
    cells: slot("cells"),
    oslClasses: slot("oslClasses"),
    oslClassNames,
    oslClassRepresentative,
    oslModelFeatures: slot("oslModelFeatures"),
    stagedLength: slot("stagedLength"),
    oslAt: slot("oslAt"),
    slo: slot("sloTtftMs") < 0 ? null : { ttft_ms: slot("sloTtftMs"), tpot_ms: slot("sloTpotMs") },
    seed: slot("seed"),
    checksum: `xxh64:${hex(slot("checksumHi"))}${hex(slot("checksumLo"))}`,
    split: str("splitAt", "splitLength"),
    provenance: {
      tool: str("toolAt", "toolLength") ?? "",
      created: str("createdAt", "createdLength") ?? "",
      workload: str("workloadAt", "workloadLength") ?? "",
      ...(notes === null ? {} : { notes }),
    },
  };
}
