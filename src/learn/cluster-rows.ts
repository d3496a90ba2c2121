// The clustering's rows at the boundary (src/learn/scaler.ts, kmeans.ts, gmm.ts): rows in as one row-major
// Float64Array (flatten: no empty input, ragged rows or non-finite values), rows out again (toRows), and the argument
// checks. Every message names the function and the argument.

export function fail(fn: string, message: string): never {
  throw new Error(`${fn}: ${message}`);
}

/** Rows as one row-major Float64Array; rejects empty input, ragged rows and non-finite values. */
export function flatten(
  fn: string,
  arg: string,
  rows: number[][],
  transform?: (x: number) => number,
): { x: Float64Array; n: number; d: number } {
  if (!Array.isArray(rows) || rows.length === 0) fail(fn, `${arg} is empty (need at least one row)`);
  const d = Array.isArray(rows[0]) ? rows[0].length : 0;
  if (d === 0) fail(fn, `${arg}[0] has no columns (need at least one)`);
  const n = rows.length;
  const x = new Float64Array(n * d);
  for (let i = 0; i < n; i++) {
    const row = rows[i];
    if (!Array.isArray(row) || row.length !== d)
      fail(fn, `${arg}[${i}] has ${Array.isArray(row) ? row.length : "no"} columns, expected ${d}`);
    for (let j = 0; j < d; j++) {
      const raw = row[j] as number;
      const v = transform ? transform(raw) : raw;
      if (typeof raw !== "number" || !Number.isFinite(v)) {
        fail(
          fn,
          transform
            ? `${arg}[${i}][${j}] must be a finite number > −1 (it is log1p'd), got ${String(raw)}`
            : `${arg}[${i}][${j}] is not a finite number: ${String(raw)}`,
        );
      }
      x[i * d + j] = v;
    }
  }
  return { x, n, d };
}

export function checkInteger(fn: string, arg: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) fail(fn, `${arg} must be an integer ≥ ${min}, got ${String(v)}`);
}

export function checkPositive(fn: string, arg: string, v: number, allowZero: boolean): void {
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || (!allowZero && v === 0)) {
    fail(fn, `${arg} must be a finite number ${allowZero ? "≥" : ">"} 0, got ${String(v)}`);
  }
}

export function toRows(a: Float64Array, rows: number, d: number): number[][] {
  const out: number[][] = [];
  for (let r = 0; r < rows; r++) out.push(Array.from(a.subarray(r * d, (r + 1) * d)));
  return out;
}
