// Every error message of the core, in one place. The core returns a code and a detail value (errorDetail());
// the host turns them into a CoreError whose message says what went wrong and where.

export const ErrorCode = {
  OK: 0,
  NOT_INITIALIZED: 1,
  ALREADY_INITIALIZED: 2,
  BAD_CONFIG: 3,
  BAD_BLOCK_SIZE: 4,
  INPUT_TOO_LARGE: 5,
  BAD_LENGTH: 6,
  UNKNOWN_WORKER: 7,
  BAD_ROLE: 8,
  INDEX_FULL: 9,
  BATCH_TOO_LARGE: 10,
  BAD_LOAD: 11,
  NO_TABLE: 12,
  BAD_KIND: 13,
  BAD_K: 14,
  BAD_DIMS: 15,
  BAD_FEATURE: 16,
  BAD_NUMBER: 17,
  BAD_BIT: 18,
  BAD_PARAM: 19,
  NO_DECODE_WORKER: 20,
  BAD_OSL: 21,
  BAD_TURN: 22,
  BAD_PINNED: 23,
  BAD_SIGNAL: 24,
  TABLE_TOO_LARGE: 25,
} as const;

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

const CONFIG_FIELDS = ["maxWorkers (1–16384)", "maxInputBytes (64 B–256 MiB)", "indexBlocks (0–67,108,864)"];

/** The message for a core error code; `detail` is the value or index the core reported. */
export function coreErrorMessage(code: number, detail: number): string {
  switch (code) {
    case ErrorCode.NOT_INITIALIZED: return "core: not initialized (call init first)";
    case ErrorCode.ALREADY_INITIALIZED: return "core: already initialized (one init per instance)";
    case ErrorCode.BAD_CONFIG:
      return detail >= 0 && detail < CONFIG_FIELDS.length
        ? `core: config: ${CONFIG_FIELDS[detail]} out of range`
        : `core: config: capacity must be ≥ 0, got ${detail}`;
    case ErrorCode.BAD_BLOCK_SIZE: return `core: blockSize must be an integer in 1–4096, got ${detail}`;
    case ErrorCode.INPUT_TOO_LARGE: return `core: input of ${detail} items does not fit the input buffer (raise maxPromptTokens)`;
    case ErrorCode.BAD_LENGTH: return `core: length or token count out of range: ${detail}`;
    case ErrorCode.UNKNOWN_WORKER: return `core: unknown worker index ${detail}`;
    case ErrorCode.BAD_ROLE: return `core: role must be 0 (none), 1 (prefill), 2 (decode) or 3 (both), got ${detail}`;
    case ErrorCode.INDEX_FULL: return `core: worker capacities exceed the index pool (${detail} blocks left; raise indexBlocks)`;
    case ErrorCode.BATCH_TOO_LARGE: return `core: batch of ${detail} hashes too large`;
    case ErrorCode.BAD_LOAD: return `core: load must be a finite number ≥ 0, got ${detail}`;
    case ErrorCode.NO_TABLE: return "core: no table loaded";
    case ErrorCode.BAD_KIND: return `core: unknown table kind ${detail}`;
    case ErrorCode.BAD_K: return `core: K must be 1–256, got ${detail}`;
    case ErrorCode.BAD_DIMS: return `core: feature count must be 1–4, got ${detail}`;
    case ErrorCode.BAD_FEATURE: return `core: feature ${detail} is unknown or repeated`;
    case ErrorCode.BAD_NUMBER: return `core: table value at staged index ${detail} is not a finite number in range`;
    case ErrorCode.BAD_BIT: return `core: bit ${detail} is not 0 or 1`;
    case ErrorCode.BAD_PARAM: return `core: rule parameter at staged index ${detail} is invalid`;
    case ErrorCode.NO_DECODE_WORKER: return "core: no decode worker is registered";
    case ErrorCode.BAD_OSL: return `core: osl_hat must be a finite number ≥ 0, got ${detail}`;
    case ErrorCode.BAD_TURN: return `core: turn must be ≥ 0, got ${detail}`;
    case ErrorCode.BAD_PINNED: return `core: pinned decode worker ${detail} is not a registered decode worker`;
    case ErrorCode.BAD_SIGNAL: return `core: ${detail === 0 ? "prefillQueue" : "qps"} must be a finite number ≥ 0`;
    case ErrorCode.TABLE_TOO_LARGE: return `core: table needs ${detail} staged values, more than the staging area holds`;
    default: return `core: error ${code} (detail ${detail})`;
  }
}

export class CoreError extends Error {
  readonly code: number;
  readonly detail: number;
  constructor(code: number, detail: number, context?: string) {
    super(context ? `${context}: ${coreErrorMessage(code, detail)}` : coreErrorMessage(code, detail));
    this.name = "CoreError";
    this.code = code;
    this.detail = detail;
  }
}
