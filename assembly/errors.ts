// The error detail: every fallible export returns OK or an error code (assembly/generated/abi.ts, from
// spec/abi.json, where the hosts' messages live too); `errorDetail()` carries the offending index or value.

let detail: f64 = 0;

/** Records what the last error was about (an index, a count or a value) and returns the code. */
export function fail(code: i32, what: f64): i32 {
  detail = what;
  return code;
}

export function errorDetail(): f64 {
  return detail;
}
