// Error codes returned by every fallible export (0 = ok). The messages live in one place on the host
// side (src/errors.ts); `errorDetail()` carries the offending index or value where one applies.

export const OK: i32 = 0;
export const E_NOT_INITIALIZED: i32 = 1;
export const E_ALREADY_INITIALIZED: i32 = 2;
export const E_BAD_CONFIG: i32 = 3;
export const E_BAD_BLOCK_SIZE: i32 = 4;
export const E_INPUT_TOO_LARGE: i32 = 5;
export const E_BAD_LENGTH: i32 = 6;
export const E_UNKNOWN_WORKER: i32 = 7;
export const E_BAD_ROLE: i32 = 8;
export const E_INDEX_FULL: i32 = 9;
export const E_BATCH_TOO_LARGE: i32 = 10;
export const E_BAD_LOAD: i32 = 11;
export const E_NO_TABLE: i32 = 12;
export const E_BAD_KIND: i32 = 13;
export const E_BAD_K: i32 = 14;
export const E_BAD_DIMS: i32 = 15;
export const E_BAD_FEATURE: i32 = 16;
export const E_BAD_NUMBER: i32 = 17;
export const E_BAD_BIT: i32 = 18;
export const E_BAD_PARAM: i32 = 19;
export const E_NO_DECODE_WORKER: i32 = 20;
export const E_BAD_OSL: i32 = 21;
export const E_BAD_TURN: i32 = 22;
export const E_BAD_PINNED: i32 = 23;
export const E_BAD_SIGNAL: i32 = 24;
export const E_TABLE_TOO_LARGE: i32 = 25;

let detail: f64 = 0;

/** Records what the last error was about (an index, a count or a value) and returns the code. */
export function fail(code: i32, what: f64): i32 {
  detail = what;
  return code;
}

export function errorDetail(): f64 {
  return detail;
}
