// The core's errors for TypeScript hosts. The core returns a code and a detail value (errorDetail()); the host
// turns them into a CoreError whose message (from spec/abi.json, generated) says what went wrong and where.

import { ERROR_MESSAGES, ErrorCode } from "../generated/abi.js";
export { ErrorCode } from "../generated/abi.js";

export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The message for a core error code (spec/abi.json "errors"); `detail` is the value or index the core reported. */
export function coreErrorMessage(code: number, detail: number): string {
  const entry = ERROR_MESSAGES[code];
  if (!entry || code === 0) return `core: error ${code} (detail ${detail})`;
  const template = entry.by_detail?.[String(detail)] ?? entry.message;
  return template.replaceAll("{detail}", String(detail));
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
