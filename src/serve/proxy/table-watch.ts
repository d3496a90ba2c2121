// The table file read again when it changes (`table_reload_s`): how one table swap reaches every replica of the proxy
// that loads the same file (docs/serving.md "Replicas"). The file is checked every table_reload_s (its mtime, size and
// inode); a changed file is decoded and validated by the core as PUT /admin/table's body is, and a file that does not
// load leaves the table in force (logged, counted). A table PUT since is replaced only when the file changes again.

import { readFile } from "node:fs/promises";
import { fileStamp, fileStampSync } from "../file-stamp.js";
import type { ServeConfig } from "../config.js";
import { Counter } from "../prometheus.js";
import type { Logger } from "./log.js";
import type { ProxyMetrics } from "./metrics.js";

export class TableWatch {
  private stamp = "";
  private timer: NodeJS.Timeout | null = null;
  private readonly reloads: Counter;

  constructor(
    private readonly config: Pick<ServeConfig, "table" | "table_reload_s">,
    private readonly swap: (bytes: Uint8Array) => void,
    metrics: ProxyMetrics,
    private readonly log: Logger,
  ) {
    this.reloads = new Counter({
      name: "dolphin_table_reloads_total",
      help: "Reads of the changed table file (table_reload_s), by outcome (ok: swapped in; failed: the table in force kept)",
      labelNames: ["outcome"],
      registers: [metrics.registry],
    });
    // the file as the proxy loaded it a moment ago
    try {
      this.stamp = fileStampSync(config.table);
    } catch {
      this.stamp = "";
    }
  }

  /** Checks the file every table_reload_s from now on. */
  start(): void {
    this.timer = setInterval(() => void this.check(), this.config.table_reload_s * 1000);
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** Reads the file again if it changed; true when its table was swapped in. */
  async check(): Promise<boolean> {
    const path = this.config.table;
    try {
      const stamp = await fileStamp(path);
      if (stamp === this.stamp) return false;
      this.stamp = stamp;
      this.swap(new Uint8Array(await readFile(path)));
      this.reloads.inc({ outcome: "ok" });
      return true;
    } catch (e) {
      this.reloads.inc({ outcome: "failed" });
      this.log.log("error", "table file not loaded, keeping the table in force", {
        file: path,
        error: (e as Error).message,
      });
      return false;
    }
  }
}
