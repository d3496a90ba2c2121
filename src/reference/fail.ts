// How the reference fails: a CoreError with the code, detail and call name the WebAssembly core reports for the
// same input, so the differential tests can compare errors as they compare results.

import { CoreError } from "../contract/errors.js";

class Fail extends CoreError {}
export function fail(code: number, detail: number, what: string): never {
  throw new Fail(code, detail, what);
}
