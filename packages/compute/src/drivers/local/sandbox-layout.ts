import * as fs from "node:fs";
import { join } from "node:path";
import type { SandboxSpec, Usage } from "../../driver.ts";

/**
 * On-disk layout of one local sandbox, under `<dataDir>/sandboxes/<id>/`:
 *   workspace.img      the workspace's ext4 image (sparse, root-only), see workspace-image.ts
 *   workspace/         where the image is mounted (its root owned by the sandbox uid),
 *                      bound read-write at mount_path; unmounted, a root-only empty directory
 *   etc/               generated passwd, group, hosts, hostname (read-only in the sandbox)
 *   state.json         pids and uid, to re-attach after a restart of the service
 *   usage.json         lifetime usage captured when the sandbox stopped
 *   io-base.json       its workspace's disk counters when it started (workspace-io.ts)
 *   cgroup-base.json   the counters of its cgroups before the current one (spare-cgroup.ts)
 *   annotations.json   {"compute.platform.io/delete-after": ISO time} once destroyed
 * The sandbox directory itself is root-owned 0711 so a sandbox uid can reach
 * only its own workspace.
 */
export interface SandboxState {
  /** Host pid of the bwrap process we spawned (the sandbox's supervisor). */
  bwrapPid: number;
  /** Host pid of the sandbox's pid 1; exec enters its namespaces. */
  initPid: number;
  /** /proc/<initPid>/stat start time, to tell a reused pid apart. */
  initStartTime: string;
  uid: number;
}

export class SandboxLayout {
  readonly dir: string;
  constructor(
    dataDir: string,
    readonly sandboxId: string,
  ) {
    this.dir = join(dataDir, "sandboxes", sandboxId);
  }
  get workspace(): string {
    return join(this.dir, "workspace");
  }
  get image(): string {
    return join(this.dir, "workspace.img");
  }
  get etc(): string {
    return join(this.dir, "etc");
  }
  get annotationsFile(): string {
    return join(this.dir, "annotations.json");
  }

  prepare(spec: SandboxSpec, uid: number): void {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o711 });
    fs.chmodSync(this.dir, 0o711);
    // The mount point itself stays root's: should the image ever be missing,
    // the sandbox finds a directory it cannot write, not the host's disk.
    fs.mkdirSync(this.workspace, { recursive: true, mode: 0o700 });
    fs.chmodSync(this.workspace, 0o700);
    fs.mkdirSync(this.etc, { recursive: true, mode: 0o755 });
    const files: Record<string, string> = {
      passwd: `sandbox:x:${uid}:${uid}:sandbox:${spec.workspace.mountPath}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`,
      group: `sandbox:x:${uid}:\nnogroup:x:65534:\n`,
      hosts: "127.0.0.1 localhost sandbox\n::1 localhost\n",
      hostname: "sandbox\n",
    };
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(join(this.etc, name), text, { mode: 0o644 });
  }

  exists(): boolean {
    return fs.existsSync(this.dir);
  }

  writeState(state: SandboxState): void {
    writeJson(join(this.dir, "state.json"), state);
  }
  readState(): SandboxState | undefined {
    return readJson(join(this.dir, "state.json"));
  }
  writeUsage(usage: Usage): void {
    writeJson(join(this.dir, "usage.json"), usage);
  }
  readUsage(): Usage | undefined {
    return readJson(join(this.dir, "usage.json"));
  }
  /** The workspace's I/O counters when the sandbox started (its usage counts from there). */
  writeIoBase(base: { device: string; read: number; write: number }): void {
    writeJson(join(this.dir, "io-base.json"), base);
  }
  readIoBase(): { device: string; read: number; write: number } | undefined {
    return readJson(join(this.dir, "io-base.json"));
  }
  writeAnnotations(annotations: Record<string, string>): void {
    writeJson(this.annotationsFile, annotations);
  }
  readAnnotations(): Record<string, string> | undefined {
    return readJson(this.annotationsFile);
  }
}

/** Replaces file with value's JSON at once (a crash leaves the old or the new, never half). */
export function writeJson(file: string, value: unknown): void {
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(value), { mode: 0o600 });
  fs.renameSync(tmp, file);
}

export function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as T;
  } catch {
    return undefined;
  }
}

/**
 * Start time field of /proc/<pid>/stat; "" when the process is gone or has
 * ended and waits to be reaped (a zombie: a sandbox killed with its service
 * stays one until its reparented parent is reaped, and must not count as running).
 */
export function processStartTime(pid: number): string {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command (which may hold spaces) start after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] === "Z" || fields[0] === "X") return "";
    return fields[19] ?? "";
  } catch {
    return "";
  }
}
