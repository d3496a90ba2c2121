// The output-length fields of a table: `osl_classes` (names, thresholds, representative lengths) and `osl_model` (a
// logistic classifier over OSL_MODEL_FEATURES, one weight row per class). The twin of assembly/table/osl-fields.ts.

import {
  expectArray,
  expected,
  expectLength,
  expectMap,
  expectString,
  numberArray,
  rejectUnknownKeys,
  strictlyAscending,
} from "./fields.js";
import { OSL_MODEL_FEATURES, TableError, type OslClasses, type OslModel, type OslModelFeature } from "./table.js";

const MAX_OSL_CLASSES = 16;

export function validateOslModel(v: unknown, classes: OslClasses | undefined): OslModel {
  const path = "osl_model";
  if (!classes)
    throw new TableError(path, "needs osl_classes (the classes it predicts and their representative lengths)");
  const m = expectMap(v, path);
  rejectUnknownKeys(m, path, ["kind", "features", "mean", "std", "weights", "bias"]);
  if (m.kind !== "logistic") throw expected(`${path}.kind`, '"logistic"', m.kind);
  const names = expectArray(m.features, `${path}.features`, "an array of feature names");
  if (names.length < 1 || names.length > OSL_MODEL_FEATURES.length) {
    throw new TableError(
      `${path}.features`,
      `expected 1 to ${OSL_MODEL_FEATURES.length} features, got ${names.length}`,
    );
  }
  const features = names.map((n, i) => {
    const f = expectString(n, `${path}.features[${i}]`) as OslModelFeature;
    if (!OSL_MODEL_FEATURES.includes(f))
      throw new TableError(
        `${path}.features[${i}]`,
        `unknown feature ${JSON.stringify(f)} (known: ${OSL_MODEL_FEATURES.join(", ")})`,
      );
    if (names.indexOf(f) !== i)
      throw new TableError(`${path}.features[${i}]`, `duplicate feature ${JSON.stringify(f)}`);
    return f;
  });
  const d = features.length;
  const c = classes.names.length;
  const mean = numberArray(m.mean, `${path}.mean`, d, {}, "values (one per feature)");
  const std = numberArray(m.std, `${path}.std`, d, { min: 0, minExclusive: true }, "values (one per feature)");
  const rows = expectArray(m.weights, `${path}.weights`, "an array of weight rows (one per class)");
  expectLength(rows, `${path}.weights`, c, "rows (one per osl class)");
  const weights = rows.map((r, i) => numberArray(r, `${path}.weights[${i}]`, d, {}, "weights (one per feature)"));
  const bias = numberArray(m.bias, `${path}.bias`, c, {}, "values (one per osl class)");
  return { kind: "logistic", features, mean, std, weights, bias };
}

export function validateOslClasses(v: unknown): OslClasses {
  const path = "osl_classes";
  const m = expectMap(v, path);
  rejectUnknownKeys(m, path, ["names", "thresholds", "representative"]);
  const names = expectArray(m.names, `${path}.names`, "an array of class names");
  if (names.length < 1 || names.length > MAX_OSL_CLASSES) {
    throw new TableError(`${path}.names`, `expected 1 to ${MAX_OSL_CLASSES} classes, got ${names.length}`);
  }
  const seen = new Set<string>();
  const classNames = names.map((name, i) => {
    const s = expectString(name, `${path}.names[${i}]`, true);
    if (seen.has(s)) throw new TableError(`${path}.names[${i}]`, `duplicate class name ${JSON.stringify(s)}`);
    seen.add(s);
    return s;
  });
  const count = classNames.length;
  const thresholds = numberArray(
    m.thresholds,
    `${path}.thresholds`,
    count - 1,
    {},
    "thresholds (one fewer than names)",
  );
  strictlyAscending(thresholds, `${path}.thresholds`);
  const representative = numberArray(
    m.representative,
    `${path}.representative`,
    count,
    { min: 0 },
    "lengths (one per name)",
  );
  return { names: classNames, thresholds, representative };
}
