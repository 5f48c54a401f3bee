import { renameSync, writeFileSync } from "node:fs";
import type { Endpoints } from "../cli/endpoints.ts";
import type { ServiceStatus } from "./supervisor.ts";

/**
 * `<data dir>/platform.json`: where each service answers (the CLI and the
 * README's walkthroughs read `endpoints`), and what the launcher is doing:
 * its own pid, each service's pid, state, restarts and last exit (scripts
 * and the fault-injection suite find the process to kill here). Rewritten on
 * every change.
 */
export type PlatformFile = {
  endpoints: Endpoints;
  owner: { email: string };
  /** The launcher's pid. */
  pid: number;
  startedAt: string;
  /** starting until every service answers; failed once it gave up on one. */
  state: "starting" | "running" | "stopping" | "stopped" | "failed";
  /** Each service's full log is `<logs>/<service>.log`. */
  logs: string;
  services: Record<string, ServiceStatus>;
};

/** Written whole and renamed into place, so a reader never sees half a file. */
export function writePlatformFile(path: string, content: PlatformFile): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(content, null, 2)}\n`);
  renameSync(tmp, path);
}
