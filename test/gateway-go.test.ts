// The Go side of the gateway: dolphin-epp's own tests (bindings/go/cmd/dolphin-epp: the endpoints file, KV-event
// decoding and rehashing, the ext_proc exchange, health checks) and the GIE v1.5.0 plugin's (bindings/go/gie: a
// scheduling cycle with GIE's types), with go vet and gofmt. Apart from test/gateway.test.ts: these block the event
// loop while they run, and that file's sidecars and workers live in its process.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, requireGo } from "./bindings-tools.js";

const EPP_DIR = join(ROOT, "bindings", "go", "cmd", "dolphin-epp");
const GIE_DIR = join(ROOT, "bindings", "go", "gie");

describe("the gateway's Go modules", () => {
  // the picker's own tests, and the GIE v1.5.0 plugin's (bindings/go/gie: a scheduling cycle with GIE's types)
  it.each([EPP_DIR, GIE_DIR])(
    "%s passes go vet, gofmt and go test",
    (dir) => {
      requireGo();
      for (const [args, what] of [
        [["vet", "./..."], "go vet"],
        [["test", "-count=1", "./..."], "go test"],
      ] as const) {
        const r = spawnSync("go", args, { cwd: dir, encoding: "utf8" });
        expect(r.status, `${what}:\n${r.stdout}${r.stderr}`).toBe(0);
      }
      expect(spawnSync("gofmt", ["-l", "."], { cwd: dir, encoding: "utf8" }).stdout.trim()).toBe("");
    },
    600_000,
  );
});
