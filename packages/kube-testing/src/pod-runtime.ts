// What stands in for the kubelet and container runtime: every running pod
// gets one bubblewrap "container" (its own mount and PID namespace, the host
// /usr and /etc read-only, its volumes bound at their mount paths, a private
// /tmp), and every exec enters those namespaces with nsenter. So commands run
// through pods/exec see the paths, symlinks and processes a real container
// would show, and deleting the pod kills every process it started.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readlinkSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT_BINDS = ["usr", "etc", "opt", "var"];
const ROOT_LINKS = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"];

export interface ContainerMount {
  hostPath: string;
  mountPath: string;
  readOnly: boolean;
}

export interface PodSandbox {
  /** Host PID of the pod's PID 1; nsenter targets it. */
  initPid: number;
  process: ChildProcess;
  execs: Set<ChildProcess>;
}

function rootArgs(): string[] {
  const args: string[] = [];
  for (const d of ROOT_BINDS) if (existsSync(`/${d}`)) args.push("--ro-bind", `/${d}`, `/${d}`);
  for (const l of ROOT_LINKS) {
    const p = `/${l}`;
    if (!existsSync(p)) continue;
    if (lstatSync(p).isSymbolicLink()) args.push("--symlink", readlinkSync(p), p);
    else args.push("--ro-bind", p, p);
  }
  return args;
}

/** Starts the pod's namespaces; resolves once its PID 1 is known. */
export async function startPodSandbox(podDir: string, mounts: ContainerMount[]): Promise<PodSandbox> {
  const tmp = join(podDir, "tmp");
  mkdirSync(tmp, { recursive: true });
  const args = [
    "--unshare-pid",
    "--die-with-parent",
    ...rootArgs(),
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--bind",
    tmp,
    "/tmp",
  ];
  for (const m of mounts) {
    mkdirSync(m.hostPath, { recursive: true });
    args.push(m.readOnly ? "--ro-bind" : "--bind", m.hostPath, m.mountPath);
  }
  args.push("--info-fd", "3", "--", "sleep", "infinity");
  const child = spawn("bwrap", args, { stdio: ["ignore", "ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (d) => {
    stderr += d;
  });
  const info = await new Promise<string>((resolve, reject) => {
    let buf = "";
    const fd3 = child.stdio[3] as NodeJS.ReadableStream;
    fd3.on("data", (d) => {
      buf += d;
      if (/"child-pid"\s*:\s*\d+/.test(buf)) resolve(buf);
    });
    child.on("error", reject);
    child.on("exit", (code) => reject(new Error(`bwrap exited ${code}: ${stderr.trim()}`)));
  });
  const initPid = Number(/"child-pid"\s*:\s*(\d+)/.exec(info)?.[1]);
  await untilRootIsThePods(initPid, () => stderr);
  return { initPid, process: child, execs: new Set() };
}

/**
 * bwrap reports its child's pid right after the clone, while the child is
 * still building its root: an exec entering it then found no /bin/sh (3 of 40
 * execs right after a start; seen in CI). The root is the pod's once the
 * child's root (/proc/<pid>/root) is no longer the host's and holds the
 * /bin/sh every exec starts with (bwrap's intermediate root has none).
 */
async function untilRootIsThePods(initPid: number, stderr: () => string): Promise<void> {
  const host = statSync("/");
  const deadline = Date.now() + 30_000;
  for (;;) {
    const root = statSync(`/proc/${initPid}/root/`, { throwIfNoEntry: false });
    const own = root !== undefined && (root.dev !== host.dev || root.ino !== host.ino);
    if (own && existsSync(`/proc/${initPid}/root/bin/sh`)) return;
    if (Date.now() > deadline) throw new Error(`the pod's root was not ready after 30 s: ${stderr().trim()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Spawns a command inside the pod (like a CRI exec), cwd = the container's working dir. */
export function execInPod(
  pod: PodSandbox,
  workingDir: string,
  env: Record<string, string>,
  command: string[],
): ChildProcess {
  const shim = 'cd -- "$0" || exit 126; exec "$@"';
  const child = spawn(
    "nsenter",
    ["-t", String(pod.initPid), "-m", "-p", "-r", "-w", "--", "/bin/sh", "-c", shim, workingDir, ...command],
    {
      env,
      stdio: ["pipe", "pipe", "pipe"],
    },
  );
  pod.execs.add(child);
  child.on("close", () => pod.execs.delete(child));
  return child;
}

/** Kills the pod's PID 1, which takes every process of its namespace with it. */
export function stopPodSandbox(pod: PodSandbox): void {
  try {
    process.kill(pod.initPid, "SIGKILL");
  } catch {}
  pod.process.kill("SIGKILL");
  for (const e of pod.execs) e.kill("SIGKILL");
}

/** Removes a pod's directory tree, ignoring what is already gone. */
export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}
