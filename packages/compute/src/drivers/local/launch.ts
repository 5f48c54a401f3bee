import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { Logger } from "pino";
import type { SandboxObservation } from "../../driver.ts";
import { buildNative, nativeBinDir } from "../../native-build.ts";
import { baseEnv, bwrapArgs, hostEtcBinds } from "./bwrap.ts";
import type { Cgroup } from "./cgroups.ts";
import { signalNumber } from "./exec-run.ts";
import { imageRootArgs, LocalImages } from "./images/index.ts";
import { type Live, markEnded } from "./live.ts";
import { processStartTime } from "./sandbox-layout.ts";
import type { SandboxNetwork } from "./sandbox-network.ts";
import { RETIRED_CGROUP_PREFIX, SPARE_CGROUP_PREFIX, SPARE_EXEC_CGROUP, swapIntoSpare } from "./spare-cgroup.ts";
import { currentUsage, type UsageSources } from "./usage.ts";
import { MOUNTS_ROOT } from "./workspace-image.ts";
import type { WorkspaceHolder, Workspaces } from "./workspaces.ts";

const SETPRIV = "/usr/bin/setpriv";
const BWRAP = "/usr/bin/bwrap";
const UNSHARE = "/usr/bin/unshare";

/** The descriptor bwrap reads the seccomp filter from (3 and 4 are its info and readiness pipes). */
const SECCOMP_FD = 5;
/** The launcher reads "joined" here once it is in its sandbox's cgroup (joinCgroup). */
const JOIN_FD = 6;
/** A spare launcher reads its script here (prepareSpare). */
const SCRIPT_FD = 7;
/** An open descriptor of the built sandbox init (sandbox-init.c), which bwrap runs as /proc/self/fd/8. */
const INIT_FD = 8;

/** Mount point of a sandbox directory inside its launcher's private mount namespace. */
const STAGE = "/run/platform-compute-stage";

/**
 * The sandbox's init where sandbox-init.c could not be built: it tells it
 * runs inside the finished sandbox on fd 4, then waits.
 */
const SHELL_INIT = ["/bin/sh", "-c", "echo ready >&4; exec 4>&-; exec /bin/sleep infinity"];

/**
 * sandbox-init.c built (static, with cc, once per source version, as the
 * launch helper is): the sandbox's init without a shell or sleep. Rejects
 * where it cannot be built (no static C library, say); sandboxes then start
 * with the shell init.
 */
export function buildSandboxInit(dir = nativeBinDir()): Promise<string> {
  return buildNative(
    {
      name: "sandbox-init",
      sourceDir: dirname(fileURLToPath(import.meta.url)),
      sources: ["sandbox-init.c"],
      libraries: ["-static"],
      whenCompileFails: "sandboxes start with a shell as their init instead (libc6-dev has the static C library)",
    },
    dir,
  );
}

/**
 * launch-helper.c built (with cc, once per source version, as the exec
 * helper is): the launch chain's root part in one process. Rejects where it
 * cannot be built; the driver then launches through the shell chain.
 */
export function buildLaunchHelper(dir = nativeBinDir()): Promise<string> {
  return buildNative(
    {
      name: "launch-helper",
      sourceDir: dirname(fileURLToPath(import.meta.url)),
      sources: ["launch-helper.c"],
      whenCompileFails: "sandboxes start through the shell chain (sh, unshare, mount, umount, setpriv) instead",
    },
    dir,
  );
}

/** What starting a sandbox, watching its init and ending it touch of the sandbox. */
export type Launchable = WorkspaceHolder &
  UsageSources &
  Pick<
    Live,
    | "warm"
    | "rootImage"
    | "child"
    | "initPid"
    | "initStartTime"
    | "oomKillsSeen"
    | "deadlineTimer"
    | "livenessTimer"
    | "slots"
    | "pausedMs"
  >;

/** What the launch needs of the rest of the driver. */
export interface LaunchDeps<S extends Launchable> {
  /** The launch chain dies with this process (bwrap --die-with-parent, a parent-death signal before it). */
  dieWithService?: boolean;
  /** The built launch helper (launch-helper.c), or undefined: the shell chain does its part. */
  launchHelper?(): string | undefined;
  /** The built sandbox init (sandbox-init.c), or undefined: a shell is the init. */
  sandboxInit?(): string | undefined;
  /** Process cap of a sandbox's cgroup. */
  pidsMax: number;
  /**
   * The driver's cgroup: the spare launcher waits in a cgroup of its own
   * made there, which a released sandbox's resume renames into the
   * sandbox's place (spare-cgroup.ts). Without it the spare is moved into
   * the sandbox's cgroup at the resume.
   */
  root?: Cgroup;
  /** The built seccomp filter every sandbox process runs under (none yet: no sandbox may start). */
  seccompFilter(): Buffer | undefined;
  /** Whether the driver is closing: it then watches no sandbox's end. */
  isClosed(): boolean;
  /** Sets live's phase, telling its waiters and the driver's listeners (phases.ts). */
  setPhase(live: S, observation: SandboxObservation): void;
  /** A warm sandbox whose init ended before it was adopted: out of its pool, removed. */
  discardWarm(live: S): Promise<void>;
  /** Whether a warm sandbox is still in its pool (false: its pool already ended it, e.g. for a new default image). */
  warmHeld(live: S): boolean;
  workspaces: Pick<Workspaces, "attachIo" | "flushIo" | "release">;
  network?: Pick<SandboxNetwork, "stop">;
  log?: Logger;
}

/**
 * How a local sandbox runs: its cgroup, the launch chain that builds it
 * (as root, a private mount namespace and the drop to the sandbox uid: the
 * launch helper, or where it could not be built a shell with unshare, mount,
 * umount and setpriv; then bwrap and the init), its max runtime, and what
 * its init's end means (failed, released, or ended by us).
 */
export class Launcher<S extends Launchable> {
  /**
   * A blank launch chain started ahead (prepareSpare), whether it is the
   * launch helper or a shell, and the cgroup it waits in (ready: it is in).
   */
  private spare?: { child: ChildProcess; helper: boolean; init: boolean; cgroup?: SpareCgroup };
  /** Spare cgroups made by this process (their names' last part). */
  private spareCgroups = 0;
  /** Spare and retired cgroups being removed (close() waits for them). */
  private readonly removing = new Set<Promise<void>>();
  /** The built sandbox init, open (close-on-exec here; each launch gets it as INIT_FD); with its path. */
  private initFile?: { path: string; fd: number };

  constructor(private readonly deps: LaunchDeps<S>) {}

  /** Starts live's init; again: a released sandbox resumed (its disk counters go on from where they were). */
  start(live: S, again = false): void {
    const { spec, layout } = live;
    if (!live.warm && !again) this.deps.workspaces.attachIo(live, true);
    // bwrap runs as the sandbox uid, which may not traverse the data
    // directory's parents (a clone under /root, a 0700 temp dir). So, still
    // as root, the sandbox directory is bound at a fixed traversable stage in
    // a private mount namespace, with the workspace's mounted image on its
    // workspace directory, and bwrap takes its paths from there. That
    // namespace then detaches its copy of every workspace mount of the host
    // (all under MOUNTS_ROOT) in one go: held there, another sandbox's
    // workspace would stay mounted, and its loop device attached, after it is
    // destroyed, for as long as this sandbox lives.
    // An image's tree is bound at the stage's rootfs too (its parents may not be traversable either).
    // For the host's root, the host's allow-listed /etc files are bound read-only into the stage's
    // etc there too (while compute moves the launcher into the cgroup), so bwrap binds that etc whole.
    const root = live.rootImage;
    const etcBinds = root ? [] : hostEtcBinds(join(STAGE, "etc"));
    if (root) fs.mkdirSync(join(layout.dir, "rootfs"), { recursive: true, mode: 0o755 });
    LocalImages.record(layout.dir, root);
    const helper = this.deps.launchHelper?.();
    const args = bwrapArgs({
      workspace: join(STAGE, "workspace"),
      etcDir: join(STAGE, "etc"),
      mountPath: spec.workspace.mountPath,
      seccompFd: SECCOMP_FD,
      imageRoot: root ? imageRootArgs(root.tree, join(STAGE, "rootfs"), spec.workspace.mountPath) : undefined,
      // The launch helper makes the network namespace (--net) before its move into the cgroup, bwrap after it.
      networkMade: helper !== undefined,
    });
    if (this.deps.dieWithService) args.unshift("--die-with-parent");
    // As root: shield the init from the OOM killer, make the mount namespace,
    // wait until the service has moved the launcher into the sandbox cgroup
    // (joinCgroup; never a sandbox process outside it: no limits there, and
    // nothing would find it to end it), then drop to the sandbox uid for good
    // and let bwrap build the namespaces.
    const seccompFilter = this.deps.seccompFilter();
    if (!seccompFilter) throw new Error("sandbox started before its seccomp filter was built");
    fs.mkdirSync(STAGE, { recursive: true, mode: 0o755 });
    const env = baseEnv(spec.workspace.mountPath);
    const initFd = this.initFd();
    const init = initFd === undefined ? SHELL_INIT : [`/proc/self/fd/${INIT_FD}`];
    let child: ChildProcess | undefined;
    /** The spare launcher's cgroup, when the spare is taken. */
    let spareCgroup: SpareCgroup | undefined;
    if (helper) {
      // launch-helper.c: the same steps in one process (its header lists them).
      const binds = [
        [layout.dir, STAGE],
        [live.workspaceDir, join(STAGE, "workspace")],
        ...(root ? [[root.tree, join(STAGE, "rootfs")]] : []),
      ];
      const fields = [
        String(live.uid),
        String(live.uid),
        MOUNTS_ROOT,
        String(binds.length),
        ...binds.flat(),
        String(etcBinds.length),
        ...etcBinds.flat(),
        BWRAP,
        BWRAP,
        "--info-fd",
        "3",
        ...args,
        "--",
        ...init,
      ];
      if (again) ({ child, cgroup: spareCgroup } = this.takeSpare(true, initFd !== undefined, { fields, env }));
      child ??= this.spawnHelper(helper, fields, env, 7, initFd);
    } else {
      // Ending with the service: the parent-death signal is set by the first
      // process of the chain and kept through the uid change (which clears it),
      // so a service killed while a sandbox starts takes the launch with it,
      // not only a sandbox whose bwrap got as far as setting its own.
      const keepDeathSignal = this.deps.dieWithService ? "--pdeathsig keep " : "";
      const bindRoot = root ? `mount --bind "$3" ${STAGE}/rootfs && ` : "";
      // The launch helper's read-only binds (launch-helper.c, step 6): a placeholder of the source's kind, then the bind.
      const names = etcBinds.map(([source]) => basename(source)).join(" ");
      const bindEtc = etcBinds.length
        ? `for f in ${names}; do s=/etc/$f; t=${STAGE}/etc/$f; if [ -d "$s" ]; then if [ -L "$t" ] || [ ! -d "$t" ]; then rm -f "$t" && mkdir "$t" || exit 1; fi; elif [ -e "$s" ]; then if [ -L "$t" ] || [ ! -f "$t" ]; then rm -rf "$t" && : > "$t" || exit 1; fi; else continue; fi; mount --rbind -o ro,nosuid,nodev "$s" "$t" || exit 1; done && `
        : "";
      const inner = `mount --bind "$1" ${STAGE} && mount --bind "$2" ${STAGE}/workspace && ${bindRoot}${bindEtc}umount -l ${MOUNTS_ROOT} && read -r joined <&${JOIN_FD} && [ "$joined" = joined ] && exec ${JOIN_FD}<&- && shift ${root ? 3 : 2} && exec ${SETPRIV} ${keepDeathSignal}--reuid=${live.uid} --regid=${live.uid} --clear-groups --inh-caps=-all --no-new-privs -- ${BWRAP} --info-fd 3 "$@"`;
      const script = `echo -999 > /proc/self/oom_score_adj; exec ${UNSHARE} --mount --propagation private -- /bin/sh -c '${inner}' sh "$@"`;
      const argv = [layout.dir, live.workspaceDir, ...(root ? [root.tree] : []), ...args, "--", ...init];
      if (again) ({ child, cgroup: spareCgroup } = this.takeSpare(false, initFd !== undefined, { script, argv, env }));
      child ??= this.spawnChain(["-c", script, "sh", ...argv], env, 7, initFd);
    }
    // bwrap reads the filter to its end from this descriptor (and closes it before the init runs).
    const filter = child.stdio.at(SECCOMP_FD) as Writable | null | undefined;
    filter?.on("error", () => {}); // bwrap gone before reading: the exit handler reports the start failure
    filter?.end(seccompFilter);
    live.child = child;
    // A released sandbox's resume: the spare's cgroup takes the sandbox's place (no move into it), or the
    // sandbox's is made again (as it was, unless something removed it meanwhile) and the launcher moved there.
    const retired = again && spareCgroup ? this.swapCgroup(live, spareCgroup) : undefined;
    if (again && !retired) this.createCgroup(live);
    this.joinCgroup(live, child, again, retired, retired ? undefined : spareCgroup);
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-2000);
    });
    // fd 3: bwrap's info JSON (host pid of the sandbox's pid 1). fd 4: written by the
    // init itself once it runs inside the finished sandbox, which is what READY means
    // (bwrap reports child-pid before the mounts are in place).
    let info = "";
    let initPid: number | undefined;
    let inside = false;
    const infoStream = child.stdio[3] as NodeJS.ReadableStream | null;
    const readyStream = child.stdio[4] as NodeJS.ReadableStream | null;
    const maybeReady = () => {
      if (!initPid || !inside || live.initPid || live.observation.phase !== "starting") return;
      live.initPid = initPid;
      live.initStartTime = processStartTime(initPid);
      live.layout.writeState({
        bwrapPid: child.pid ?? 0,
        initPid,
        initStartTime: live.initStartTime,
        uid: live.uid,
      });
      live.oomKillsSeen = live.cgroup.stats().oomKills;
      // Until here the pipes kept the event loop alive for waiters; now nothing should.
      (infoStream as unknown as { destroy(): void }).destroy();
      (readyStream as unknown as { destroy(): void }).destroy();
      this.deps.setPhase(live, { phase: "ready" });
    };
    infoStream?.on("data", (d: Buffer) => {
      info += d.toString();
      const m = /"child-pid":\s*(\d+)/.exec(info);
      if (m) initPid = Number(m[1]);
      maybeReady();
    });
    readyStream?.on("data", () => {
      inside = true;
      maybeReady();
    });
    child.on("error", (err) => {
      this.deps.log?.error({ err, sandboxId: spec.sandboxId }, "sandbox spawn failed");
      this.deps.setPhase(live, { phase: "failed", reason: "start_error", message: err.message });
    });
    child.on("exit", (code, signal) => {
      // The init of before a release: its end was asked for.
      if (live.child !== child) return;
      if (live.observation.phase === "starting" && code !== 0) {
        this.deps.log?.error({ sandboxId: spec.sandboxId, code, stderr }, "sandbox failed to start");
      }
      void this.onInitExit(live, code, signal);
    });
    child.unref();
    (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  }

  /**
   * Starts a blank launch chain ahead of a released sandbox's resume: the
   * launch helper (or a shell) waiting for its request on a pipe. Forking
   * this process (its whole address space mapped) takes ~8 ms of the event
   * loop here, a sixth of a released resume; the resume then only writes the
   * request. At most one is kept. It waits in a cgroup of its own
   * (makeSpareCgroup), which the resume renames into the sandbox's place.
   */
  prepareSpare(): void {
    if (this.spare || this.deps.isClosed() || !this.deps.seccompFilter()) return;
    const helper = this.deps.launchHelper?.();
    let child: ChildProcess;
    let initFd: number | undefined;
    try {
      initFd = this.initFd();
      child = helper
        ? this.spawnHelper(helper, [], {}, 8, initFd, SCRIPT_FD)
        : this.spawnChain(
            ["-c", `IFS= read -r line <&${SCRIPT_FD} && exec ${SCRIPT_FD}<&- && eval "$line"`],
            baseEnv("/"),
            8,
            initFd,
          );
    } catch (err) {
      this.deps.log?.warn({ err }, "starting a spare sandbox launcher failed");
      return;
    }
    child.on("error", () => {}); // a failed spawn: the spare is simply not used
    const cgroup = this.makeSpareCgroup(child);
    child.once("exit", () => {
      if (this.spare?.child !== child) return;
      this.spare = undefined;
      if (cgroup) this.removeSpareCgroup(cgroup);
    });
    for (const stream of child.stdio) (stream as unknown as { unref?: () => void } | null)?.unref?.();
    child.unref();
    this.spare = { child, helper: helper !== undefined, init: initFd !== undefined, cgroup };
  }

  /** Ends the spare launcher (the driver closes); resolves once its cgroup and retired ones are removed. */
  close(): Promise<void> {
    const spare = this.spare;
    this.spare = undefined;
    spare?.child.kill("SIGKILL");
    if (spare?.cgroup) this.removeSpareCgroup(spare.cgroup);
    if (this.initFile) fs.closeSync(this.initFile.fd);
    this.initFile = undefined;
    return Promise.all([...this.removing]).then(() => {});
  }

  /**
   * Whether a spare or retired cgroup under the driver's is this process's
   * to remove (the housekeeping leaves it alone): the spare's, being made.
   */
  ownsCgroup(name: string): boolean {
    return this.spare?.cgroup?.name === name;
  }

  /**
   * The spare launcher's cgroup, made beside the sandboxes' (with the first
   * exec's cgroup inside), and the spare moved into it: all off the resume's
   * path. Ready once the spare is in it; undefined without the driver's
   * cgroup (the spare is then moved at the resume).
   */
  private makeSpareCgroup(child: ChildProcess): SpareCgroup | undefined {
    const root = this.deps.root;
    const pid = child.pid;
    if (!root || !pid) return undefined;
    const name = `${SPARE_CGROUP_PREFIX}${process.pid}-${++this.spareCgroups}`;
    const spare: SpareCgroup = { name, cgroup: root.child(name), ready: false, made: Promise.resolve() };
    spare.made = (async () => {
      await spare.cgroup.createAsync(true);
      await spare.cgroup.child(SPARE_EXEC_CGROUP).createAsync();
      // Only while it runs: the pid of one that ended could be another process's by the time it is written.
      const write = (file: string) => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error("the spare launcher ended");
        return fs.promises.writeFile(file, `${pid}\n`);
      };
      const [first, ...rest] = spare.cgroup.procsFiles();
      if (first) await write(first);
      await Promise.all(rest.map(write));
      spare.ready = true;
    })().catch((err) => {
      if (child.exitCode === null && child.signalCode === null)
        this.deps.log?.warn({ err }, "making the spare launcher's cgroup failed: the next resume moves it instead");
    });
    return spare;
  }

  /** Removes a spare's cgroup once what was being done to it is done (its launcher ended or gone elsewhere). */
  private removeSpareCgroup(spare: SpareCgroup): void {
    this.removeLater(spare.made.then(() => spare.cgroup.remove()));
  }

  private removeLater(removal: Promise<void>): void {
    const tracked = removal.catch((err) => this.deps.log?.warn({ err }, "removing a spare launcher's cgroup failed"));
    this.removing.add(tracked);
    void tracked.finally(() => this.removing.delete(tracked));
  }

  /**
   * A released sandbox takes the spare's cgroup (spare-cgroup.ts); returns
   * its own, renamed away, to be removed. undefined: the spare is not in it
   * (yet), or the renames failed; the sandbox's own cgroup is then used as
   * before.
   */
  private swapCgroup(live: S, spare: SpareCgroup): Cgroup | undefined {
    if (!spare.ready) return undefined;
    let retired: Cgroup;
    const { limits } = live.spec;
    try {
      retired = swapIntoSpare(
        live,
        spare.cgroup,
        { cpuMillis: limits.cpuMillis, memoryBytes: limits.memoryBytes, pidsMax: this.deps.pidsMax },
        `${RETIRED_CGROUP_PREFIX}${live.spec.sandboxId}-${process.pid}-${++this.spareCgroups}`,
      );
    } catch (err) {
      this.deps.log?.warn(
        { err, sandboxId: live.spec.sandboxId },
        "a released sandbox could not take the spare launcher's cgroup: it is moved into its own",
      );
      return undefined;
    }
    // The first exec's cgroup came with it.
    live.slots.useCgroup(live.cgroup.child(SPARE_EXEC_CGROUP));
    return retired;
  }

  /**
   * The built sandbox init's descriptor, opened once (read-only, close-on-exec
   * in this process; a launch gets its own copy as INIT_FD), or undefined:
   * not built, or it cannot be opened (the shell init then).
   */
  private initFd(): number | undefined {
    const path = this.deps.sandboxInit?.();
    if (!path) return undefined;
    if (this.initFile?.path !== path) {
      if (this.initFile) fs.closeSync(this.initFile.fd);
      this.initFile = undefined;
      try {
        this.initFile = { path, fd: fs.openSync(path, "r") };
      } catch (err) {
        this.deps.log?.warn({ err }, "opening the sandbox init failed: this sandbox starts with the shell init");
        return undefined;
      }
    }
    return this.initFile.fd;
  }

  /**
   * The spare launcher given its request, and its cgroup; none (no spare,
   * gone, of the other kind, or a request it cannot read: a line break for
   * the shell, a NUL for the helper, whose fields are NUL-terminated).
   */
  private takeSpare(
    helper: boolean,
    init: boolean,
    request: { env: Record<string, string> } & ({ fields: string[] } | { script: string; argv: string[] }),
  ): { child?: ChildProcess; cgroup?: SpareCgroup } {
    const spare = this.spare;
    this.spare = undefined;
    if (!spare) return {};
    const { child } = spare;
    const input = child.stdio.at(SCRIPT_FD) as Writable | null | undefined;
    const envWords = Object.entries(request.env).flat();
    const words = "fields" in request ? request.fields : [request.script, ...request.argv];
    const unreadable = helper ? "\0" : "\n";
    if (
      spare.helper !== helper ||
      spare.init !== init ||
      !input ||
      child.exitCode !== null ||
      child.signalCode !== null ||
      [...words, ...envWords].some((w) => w.includes(unreadable))
    ) {
      child.kill("SIGKILL");
      if (spare.cgroup) this.removeSpareCgroup(spare.cgroup);
      return {};
    }
    input.on("error", () => {}); // the spare gone meanwhile: its exit handler reports the start failure
    if ("fields" in request) {
      // launch-helper.c's request: n-env, env ("K=V")..., then the fields, each NUL-terminated.
      const env = Object.entries(request.env).map(([k, v]) => `${k}=${v}`);
      input.end(`${[String(env.length), ...env, ...request.fields].join("\0")}\0`);
    } else {
      const exports = Object.entries(request.env).map(([k, v]) => `${k}=${shellQuote(v)}`);
      input.end(`export ${exports.join(" ")}; set -- ${request.argv.map(shellQuote).join(" ")}; ${request.script}\n`);
    }
    // A start's pipes keep the event loop alive for its waiters until ready, as a fresh chain's do.
    for (const fd of [3, 4]) (child.stdio[fd] as unknown as { ref?: () => void } | null)?.ref?.();
    return { child, cgroup: spare.cgroup };
  }

  /**
   * The launch chain's first process: a shell (as root), with the start's
   * pipes on descriptors 2 to fds - 1 and the sandbox init on INIT_FD.
   */
  private spawnChain(
    shellArgs: string[],
    env: Record<string, string>,
    fds: number,
    initFd: number | undefined,
  ): ChildProcess {
    const launcher = this.deps.dieWithService ? [SETPRIV, "--pdeathsig", "KILL", "--", "/bin/sh"] : ["/bin/sh"];
    return spawn(launcher[0] as string, [...launcher.slice(1), ...shellArgs], {
      env,
      stdio: launchStdio(fds, initFd),
      detached: true, // own process group: survives a restart of the service, re-attached by recover()
    });
  }

  /**
   * The launch helper as the chain's first process (as root), with the
   * start's pipes on descriptors 2 to fds - 1 and the sandbox init on
   * INIT_FD; its fields as arguments, or (a spare) read from requestFd.
   */
  private spawnHelper(
    helper: string,
    fields: string[],
    env: Record<string, string>,
    fds: number,
    initFd: number | undefined,
    requestFd?: number,
  ): ChildProcess {
    const options = [
      ...(this.deps.dieWithService ? ["--die-with-parent"] : []),
      "--net",
      `--join-fd=${JOIN_FD}`,
      ...(requestFd === undefined ? [] : [`--request-fd=${requestFd}`]),
      "--",
    ];
    return spawn(helper, [...options, ...fields], {
      env,
      stdio: launchStdio(fds, initFd),
      detached: true, // own process group: survives a restart of the service, re-attached by recover()
    });
  }

  /**
   * Moves the launcher into live's cgroup while it makes its mount namespace
   * (as root, nothing of the sandbox running yet), then tells it to go on to
   * setpriv and bwrap; it goes on only on "joined" (a failed move closes the
   * pipe, and so does the service's end). The first move into a cgroup after a
   * quiet spell waits for an RCU grace period (cgroup v1 without
   * favordynmods: ~13 ms here, a third of a released sandbox's resume), which
   * the launcher's own work now overlaps instead of following. Once moved, a
   * released sandbox's resume (again) makes its first exec's cgroup.
   *
   * A launcher already in live's cgroup (the spare's, renamed into its
   * place; retired: the sandbox's cgroup before) is told to go on at once.
   * Then the same pid is written into the cgroup it is in: a move that moves
   * nothing, but the kernel takes its migration lock for it, waiting out the
   * grace period now, while bwrap builds the sandbox, instead of when the
   * first exec's child joins its cgroup once the sandbox is ready (the lock
   * stays quick for about a grace period after). The retired cgroup is
   * removed after that (both take the kernel's cgroup lock). A launcher that
   * leaves a spare's cgroup is moved once its move into that one is done
   * (or it could land there after this one), and that cgroup removed.
   */
  private joinCgroup(live: S, child: ChildProcess, again: boolean, retired?: Cgroup, leaving?: SpareCgroup): void {
    const gate = child.stdio.at(JOIN_FD) as Writable | null | undefined;
    gate?.on("error", () => {}); // the launcher gone: its exit handler reports the start failure
    const pid = child.pid;
    // Only while it runs: the pid of one that ended could be another process's by the time it is written.
    const write = (file: string) => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error("the launcher ended");
      return fs.promises.writeFile(file, `${pid}\n`);
    };
    const move = async () => {
      if (!gate || !pid) throw new Error("no launcher to move");
      if (!retired) {
        await leaving?.made;
        const [first, ...rest] = live.cgroup.procsFiles();
        if (first) await write(first); // the grace period, if any, off the event loop
        await Promise.all(rest.map(write)); // the others are quick after it
      }
      // A destroy meanwhile ended what was in the cgroup then, not this launcher: it must not go on.
      if (live.stopping) throw new Error(`the sandbox is stopping (${live.stopping})`);
      gate.end("joined\n");
      // A released sandbox's resume: the first exec's cgroup is made while bwrap builds the sandbox
      // (after this move, not beside it: both take the kernel's cgroup lock), not after its readiness.
      if (again) live.slots.prepareCgroup();
      if (leaving) this.removeSpareCgroup(leaving);
    };
    if (retired) {
      const [first] = live.cgroup.procsFiles();
      const primed = (async () => {
        if (first && pid) await write(first);
      })();
      this.removeLater(primed.catch(() => {}).then(() => retired.remove()));
    }
    move().catch((err) => {
      if (leaving) this.removeSpareCgroup(leaving);
      if (child.exitCode === null && child.signalCode === null && !live.stopping)
        this.deps.log?.warn(
          { err, sandboxId: live.spec.sandboxId },
          "moving a sandbox's launcher into its cgroup failed",
        );
      gate?.destroy();
    });
  }

  async onInitExit(live: S, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (live.warm) {
      if (!this.deps.isClosed() && this.deps.warmHeld(live))
        this.deps.log?.warn({ code, signal }, "a warm sandbox exited before it was used");
      await this.deps.discardWarm(live);
      return;
    }
    clearTimeout(live.deadlineTimer);
    clearInterval(live.livenessTimer);
    void this.deps.network?.stop(live.spec.sandboxId);
    // Ended by a release (a paused sandbox giving its memory back): it stays paused.
    if (live.stopping === "release") return;
    // A closed driver watches nothing: the next one finds how the sandbox ended (recover).
    if (this.deps.isClosed() && live.stopping !== "shutdown") return;
    if (live.stopping === "destroy" || live.stopping === "shutdown") {
      live.finalUsage = currentUsage(live);
      return;
    }
    // Whatever remains (execs) goes with the sandbox, as in a pod.
    await this.deps.workspaces.flushIo(live);
    live.finalUsage = currentUsage(live);
    await live.cgroup.killAll();
    const oom = live.cgroup.stats().oomKills > live.oomKillsSeen && (signal === "SIGKILL" || code === 137);
    const reason =
      live.stopping === "deadline"
        ? "deadline"
        : oom
          ? "oom"
          : live.observation.phase === "starting"
            ? "start_error"
            : "exited";
    // Nothing runs in it again: its cgroup goes now (a spare exec cgroup being made first).
    await live.slots.settle();
    await live.cgroup.remove();
    markEnded(live, reason, this.deps.log);
    // Its loop device goes too; the files stay for the session's next sandbox.
    await this.deps.workspaces.release(live);
    this.deps.setPhase(live, {
      phase: "failed",
      reason,
      exitCode: code ?? (signal ? 128 + signalNumber(signal) : undefined),
    });
  }

  armDeadline(live: S): void {
    clearTimeout(live.deadlineTimer);
    // max_runtime counts running time: the pauses that ended are left out.
    const remaining = live.spec.createdAt.getTime() + live.spec.limits.maxRuntimeMs + live.pausedMs - Date.now();
    live.deadlineTimer = setTimeout(
      () => {
        live.stopping = "deadline";
        this.deps.log?.info({ sandboxId: live.spec.sandboxId }, "sandbox reached max_runtime");
        if (!live.child) {
          // Adopted after a restart: no exit event will come from a child.
          void live.cgroup.killAll().then(() => this.onInitExit(live, null, "SIGKILL"));
        } else void live.cgroup.killAll();
      },
      Math.max(0, remaining),
    );
    live.deadlineTimer.unref();
  }

  /** Makes live's cgroup with its spec's limits. */
  createCgroup(live: S): void {
    const { limits } = live.spec;
    live.cgroup.create({ cpuMillis: limits.cpuMillis, memoryBytes: limits.memoryBytes, pidsMax: this.deps.pidsMax });
  }
}

/** The spare launcher's cgroup (spare-cgroup.ts): ready once the spare is in it. */
interface SpareCgroup {
  name: string;
  cgroup: Cgroup;
  ready: boolean;
  /** Settles once it is made and the spare moved in, or that failed. */
  made: Promise<void>;
}

/**
 * Resolves once a sandbox's launch child (bwrap, the init's parent) has
 * exited, or after timeoutMs. The timer is ref'd on purpose: the child
 * handle is unref'd (the sandbox may outlive this process), so without it
 * the event loop could end before the exit is delivered.
 */
export async function launchExited(child: ChildProcess | undefined, timeoutMs: number): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((r) => {
    const timer = setTimeout(r, timeoutMs);
    child.once("exit", () => {
      clearTimeout(timer);
      r();
    });
  });
}

/** A launch's descriptors: pipes on 2 to fds - 1, the sandbox init's descriptor (if any) on INIT_FD. */
function launchStdio(fds: number, initFd: number | undefined): ("ignore" | "pipe" | number)[] {
  const stdio: ("ignore" | "pipe" | number)[] = ["ignore", "ignore"];
  for (let fd = 2; fd < fds; fd++) stdio.push("pipe");
  if (initFd !== undefined) {
    while (stdio.length < INIT_FD) stdio.push("ignore");
    stdio.push(initFd);
  }
  return stdio;
}

/** s as one word of a POSIX shell command line. */
function shellQuote(s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`;
}
