#!/usr/bin/env -S node --import tsx
// compute-gc: removes soft-deleted workspaces whose delete-after has passed.
// Local driver: scans COMPUTE_DATA_DIR. Run it from cron (the Kubernetes
// deployment runs the same logic as a CronJob through its driver).
//   compute-gc [--data-dir DIR] [--now ISO-TIME] [--dry-run]
import { parseArgs } from "node:util";
import { loadConfig } from "./config.ts";
import { collectExpiredWorkspaces, listExpiredWorkspaces } from "./drivers/local/gc.ts";

const { values } = parseArgs({
  options: { "data-dir": { type: "string" }, now: { type: "string" }, "dry-run": { type: "boolean" } },
});
const dataDir = values["data-dir"] ?? loadConfig().dataDir;
const now = values.now ? new Date(values.now) : new Date();
if (Number.isNaN(now.getTime())) {
  console.error("compute-gc: --now must be an ISO time");
  process.exit(2);
}
const ids = values["dry-run"] ? listExpiredWorkspaces(dataDir, now) : await collectExpiredWorkspaces(dataDir, now);
console.log(JSON.stringify({ dataDir, now: now.toISOString(), dryRun: Boolean(values["dry-run"]), removed: ids }));
