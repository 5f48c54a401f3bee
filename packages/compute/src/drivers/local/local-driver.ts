import { type ChildProcess, spawn } from "node:child_process";
import { randomInt, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import type { Writable } from "node:stream";
import { ComputeReason, PlatformError } from "@platform/errors";
import type { NetworkPolicy } from "@platform/network-policy";
import type { Logger } from "pino";
import {
  DELETE_AFTER_KEY,
  type ExecEvent,
  type ExecRequest,
  KILL_GRACE_MS,
  type ListResult,
  type ReadResult,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxSpec,
  SOFT_DELETE_GRACE_MS,
  type Usage,
  zeroUsage,
} from "../../driver.ts";
import type { EgressProxy } from "../../egress/proxy.ts";
import { KeyedLock } from "../../keyed-lock.ts";
import { LIMITS } from "../../service/limits.ts";
import { workspaceSizeBytes } from "../../service/workspace-size.ts";
import { baseEnv, bwrapArgs } from "./bwrap.ts";
import { type Cgroup, detectCgroups } from "./cgroups.ts";
import { favorDynamicCgroupMods } from "./dynmods.ts";
import { ExecHelper, type HelperBuild } from "./exec-helper.ts";
import { runExec, signalNumber } from "./exec-run.ts";
import { collectExpired, expiredWorkspaces } from "./gc.ts";
import {
  HOST_IMAGE,
  ImageStore,
  imageRootArgs,
  LocalImages,
  type RootImage,
  type StoredImage,
} from "./images/index.ts";
import { ENDED_KEY, failedMark, type Live, markEnded, newLive, openFs } from "./live.ts";
import { mountPointsUnder } from "./mount-table.ts";
import { Pauser } from "./pause.ts";
import { Phases } from "./phases.ts";
import { processStartTime, SandboxLayout, writeJson } from "./sandbox-layout.ts";
import { SandboxNetwork } from "./sandbox-network.ts";
import { deleteAfterOf, SessionWorkspace } from "./session-workspace.ts";
import { removeStaleSocketDirs } from "./socket-dir.ts";
import { currentUsage, workspaceIo } from "./usage.ts";
import { WARM_PREFIX, WarmPool } from "./warm-pool.ts";
import { MOUNTS_ROOT, releaseImages, releaseOrphanedMounts, WorkspaceImage } from "./workspace-image.ts";
import { flushWorkspace, WorkspaceIo } from "./workspace-io.ts";

export { sandboxUid } from "./live.ts";

export interface LocalDriverOptions {
  /** Root of sandbox directories (`<dataDir>/sandboxes/<id>`). */
  dataDir: string;
  /** SIGTERM → SIGKILL grace on cancel; the spec's 10 s unless a test shortens it. */
  killGraceMs?: number;
  /** Process cap per sandbox (fork bombs stop here). */
  pidsMax?: number;
  /** cgroup directory name under the service's own cgroup. */
  cgroupPrefix?: string;
  /** Memory sampling period for the average-RSS metric. */
  sampleIntervalMs?: number;
  logger?: Logger;
  /**
   * Kill sandboxes when this process dies (bwrap --die-with-parent). Off in
   * production, where sandboxes outlive a restart and are re-attached; on in
   * tests, so a killed test run leaves nothing behind.
   */
  dieWithService?: boolean;
  /**
   * Sandboxes kept started ahead (default 4): a CreateSandbox with the
   * default mount path adopts one (renamed to its id, limits applied) instead
   * of waiting for bwrap to build a new one.
   */
  warmSandboxes?: number;
  /**
   * Size of a workspace whose spec leaves it empty (PVC_WORKSPACE_SIZE,
   * default 5Gi). Warm sandboxes are made with it, so only creates asking
   * for this size adopt one.
   */
  defaultWorkspaceSize?: string;
  /**
   * How long a paused sandbox stays frozen, its processes kept (a resume is
   * a thaw), before they are ended and its memory given back (a resume is
   * then a new start on the same workspace). Default 60 s; 0: at once.
   */
  releasePausedAfterMs?: number;
  /** Mount a hierarchy with favordynmods so cgroup migrations skip an RCU grace period (dynmods.ts); default off. */
  favorDynamicCgroupMods?: boolean;
  /**
   * The egress proxy sandboxes with a network policy reach the outside
   * through (sandbox-network.ts). Without it the driver refuses policies.
   */
  egress?: EgressProxy;
  /**
   * SANDBOX_IMAGE: the image of a sandbox that names none. Stored
   * (`<dataDir>/images`), its tree is the sandboxes' root; not stored, or
   * `host`, they see the host's /usr (as before images).
   */
  defaultImage?: string;
  /**
   * An image neither stored nor the default: INVALID_ARGUMENT listing the
   * images (compute's COMPUTE_UNKNOWN_IMAGE=refuse, its default), or, off
   * (this class's default, for drivers made without a store in mind), run
   * on the host's /usr as every image did before images.
   */
  refuseUnknownImages?: boolean;
}

const SETPRIV = "/usr/bin/setpriv";
const BWRAP = "/usr/bin/bwrap";
const UNSHARE = "/usr/bin/unshare";

/** The descriptor bwrap reads the seccomp filter from (3 and 4 are its info and readiness pipes). */
const SECCOMP_FD = 5;
/** The launcher reads "joined" here once it is in its sandbox's cgroup (joinCgroup). */
const JOIN_FD = 6;

/** An empty cgroup no sandbox of this data directory claims is removed at start after this long. */
const ABANDONED_CGROUP_MS = 10 * 60_000;

/** How long a paused sandbox keeps its processes (frozen) before they are ended; see LocalDriverOptions. */
const RELEASE_PAUSED_AFTER_MS = 60_000;

/** Mount point of a sandbox directory inside its launcher's private mount namespace. */
const STAGE = "/run/platform-compute-stage";

/**
 * The embedded driver: one bubblewrap sandbox per SandboxSpec, in its own
 * cgroup, with a long-lived init process. Each exec is started by the exec
 * helper in the init's namespaces after joining a per-exec child cgroup (so
 * the exec's own usage is measured and its whole tree can be killed); see
 * the README for the numbers.
 */
export class LocalDriver implements SandboxDriver {
  readonly name = "local";
  /** stdin and terminals for execs (issue 27): the exec helper's stdin socket or pseudo-terminal. */
  readonly execInput = true;
  private readonly sandboxes = new Map<string, Live>();
  private readonly phases = new Phases();
  private readonly killGraceMs: number;
  private readonly pidsMax: number;
  private readonly root: Cgroup;
  private readonly sampler: NodeJS.Timeout;
  private readonly log?: Logger;
  private readonly helper: ExecHelper;
  /**
   * The built helper and seccomp filter. Without them no sandbox starts: the
   * filter is what every sandbox process runs under, and only the helper can
   * install it in an exec (there is no fallback without it).
   */
  private readonly built: Promise<HelperBuild>;
  private seccompFilter?: Buffer;
  /** Warm sandboxes per image (digest, or `host`): the default image's, and one kept for each image once used. */
  private readonly warmPools = new Map<string, WarmPool<Live>>();
  /** The image store and what `image` means here (images/). */
  readonly images: LocalImages;
  /** Per session workspace key: the tail of the work on it (create, release, GC), so they never interleave. */
  private readonly workspaceLocks = new KeyedLock();
  private readonly defaultWorkspaceBytes: number;
  private closed = false;
  /** Pause, resume and destroy of one sandbox run one at a time. */
  private readonly ops = new KeyedLock();
  /** Present with an egress proxy: sandboxes may then have a network policy. */
  private readonly network?: SandboxNetwork;
  setNetworkPolicy?: (sandboxId: string, policy: NetworkPolicy | undefined) => Promise<void>;
  private readonly pauser: Pauser<Live>;

  constructor(private readonly options: LocalDriverOptions) {
    if (options.egress) {
      const network = new SandboxNetwork(options.egress, options.logger);
      this.network = network;
      this.setNetworkPolicy = async (sandboxId, policy) => {
        const live = this.get(sandboxId);
        if (live.destroyed)
          throw PlatformError.failedPrecondition("sandbox is destroyed", ComputeReason.sandboxNotRunnable);
        network.setPolicy(sandboxId, policy);
      };
    }
    this.killGraceMs = options.killGraceMs ?? KILL_GRACE_MS;
    this.pidsMax = options.pidsMax ?? 512;
    this.log = options.logger;
    fs.mkdirSync(join(options.dataDir, "sandboxes"), { recursive: true, mode: 0o711 });
    this.root = detectCgroups(options.cgroupPrefix ?? "platform-compute");
    if (options.favorDynamicCgroupMods ?? false) {
      const dynmods = favorDynamicCgroupMods();
      if (typeof dynmods === "object")
        this.log?.info(
          { reason: dynmods.unavailable },
          "cgroup favordynmods unavailable: starts and resumes wait for the kernel's cgroup migrations",
        );
    }
    this.pauser = new Pauser<Live>({
      ops: this.ops,
      get: (id) => this.get(id),
      setPhase: (live, observation) => this.phases.set(live, observation),
      waitSettled: (live, signal) => this.phases.waitSettled(live, signal),
      armDeadline: (live) => this.armDeadline(live),
      startAgain: (live) => {
        this.refuseIfClosed();
        this.createCgroup(live); // as it was, unless something removed it meanwhile
        this.start(live, true);
      },
      network: this.network,
      releaseAfterMs: options.releasePausedAfterMs ?? RELEASE_PAUSED_AFTER_MS,
      log: options.logger,
    });
    this.removeEndedCgroups();
    this.sampler = setInterval(() => this.sample(), options.sampleIntervalMs ?? 200);
    this.sampler.unref();
    this.helper = new ExecHelper(options.logger);
    this.built = this.helper.build().then((b) => {
      this.seccompFilter = b.seccompFilter;
      return b;
    });
    this.built.catch((err) =>
      this.log?.error({ err }, "no sandbox can start: the exec helper and its seccomp filter were not built"),
    );
    this.images = new LocalImages(
      new ImageStore(options.dataDir, options.logger),
      options.defaultImage ?? "",
      {
        inUse: () => this.imagesInUse(false),
        held: () => this.imagesInUse(true),
        dropWarm: (digest) => this.dropWarm(digest),
        imported: (image) => this.onImported(image),
      },
      options.logger,
      options.refuseUnknownImages ?? false,
    );
    this.images.logUnstoredDefault();
    this.warmPoolFor(this.images.resolve(""), options.warmSandboxes ?? 4);
    this.defaultWorkspaceBytes = workspaceSizeBytes(
      options.defaultWorkspaceSize ?? LIMITS.defaultWorkspaceSize,
      "defaultWorkspaceSize",
    );
    void this.removeWarmLeftovers()
      .then(() => this.releaseOrphans())
      .then(() => this.removeStaleSocketDirs())
      // Once more a little later: a sandbox killed with its service keeps its cgroup busy until its zombies are reaped.
      .then(() => setTimeout(() => this.removeEndedCgroups(), 2000).unref())
      .then(() => this.built)
      .then(
        () => {
          for (const pool of this.warmPools.values()) pool.refill();
        },
        () => {},
      );
  }

  async create(spec: SandboxSpec): Promise<void> {
    try {
      await this.built;
    } catch (err) {
      throw PlatformError.internal(`sandbox provisioning failed: ${(err as Error).message}`, err);
    }
    const sizeBytes = this.workspaceBytes(spec);
    const root = this.images.resolve(spec.image);
    this.wireNetwork(spec);
    if (this.sandboxes.has(spec.sandboxId)) {
      throw PlatformError.alreadyExists(`sandbox ${spec.sandboxId} exists`);
    }
    const ws = new SessionWorkspace(this.options.dataDir, spec.tenantId, spec.sessionId);
    // One at a time per session: two creates at once must not both make its workspace.
    await this.withWorkspaceLock(ws.key, async () => {
      if (this.sandboxes.has(spec.sandboxId)) throw PlatformError.alreadyExists(`sandbox ${spec.sandboxId} exists`);
      // The session had a sandbox: the new one mounts the same workspace (its size stays what it was made with).
      if (ws.exists()) return this.createOnWorkspace(spec, ws, root);
      // Warm sandboxes carry a workspace of the default size; any other size is made for the spec.
      if (sizeBytes === this.defaultWorkspaceBytes && this.adoptWarm(spec, ws, root)) return;
      const live = this.newLive(spec);
      live.rootImage = root;
      live.workspace = ws;
      this.sandboxes.set(spec.sandboxId, live);
      try {
        live.layout.prepare(spec, live.uid);
        ws.prepare(live.uid);
        await this.provisionWorkspace(live, ws.image, sizeBytes);
        this.refuseIfClosed();
        this.createCgroup(live);
      } catch (err) {
        this.sandboxes.delete(spec.sandboxId);
        // It never ran: nothing of it is kept (no mount, no loop device, no image).
        await this.removeSandboxDir(live.layout);
        await this.removeWorkspaceDir(ws.dir);
        throw err instanceof PlatformError ? err : PlatformError.internal("sandbox provisioning failed", err);
      }
      this.armDeadline(live);
      this.start(live);
    });
  }

  /** A new sandbox on the session's existing workspace: no longer marked for collection, mounted, its uid kept. */
  private async createOnWorkspace(spec: SandboxSpec, ws: SessionWorkspace, root?: RootImage): Promise<void> {
    const image = new WorkspaceImage(ws.image);
    ws.clearMark();
    let dir: string;
    try {
      dir = await image.mount({ endsWithProcess: this.options.dieWithService });
    } catch (err) {
      this.markIfUnused(ws);
      throw PlatformError.internal("sandbox provisioning failed: the session's workspace could not be mounted", err);
    }
    // Its files belong to the uid the session's first sandbox ran as.
    const live = this.newLive(spec, ws.owner()?.uid ?? fs.statSync(dir).uid);
    live.rootImage = root;
    live.workspace = ws;
    live.image = image;
    live.workspaceDir = dir;
    this.sandboxes.set(spec.sandboxId, live);
    try {
      this.refuseIfClosed();
      live.layout.prepare(spec, live.uid);
      this.createCgroup(live);
    } catch (err) {
      this.sandboxes.delete(spec.sandboxId);
      await this.removeSandboxDir(live.layout);
      await this.releaseWorkspaceLocked(live);
      throw err instanceof PlatformError ? err : PlatformError.internal("sandbox provisioning failed", err);
    }
    this.armDeadline(live);
    this.start(live);
  }

  async recover(spec: SandboxSpec): Promise<SandboxObservation> {
    const existing = this.sandboxes.get(spec.sandboxId);
    if (existing) return existing.observation;
    const live = this.newLive(spec);
    live.rootImage = LocalImages.recorded(live.layout.dir);
    this.sandboxes.set(spec.sandboxId, live);
    if (this.network && spec.networkPolicy) this.network.setPolicy(spec.sandboxId, spec.networkPolicy);
    const annotations = live.layout.readAnnotations();
    this.locateWorkspace(live, annotations?.[DELETE_AFTER_KEY] === undefined);
    const failed = failedMark(annotations);
    if (failed) {
      // It ended while a service watched it, and the record missed that (a crash in between).
      live.finalUsage = live.layout.readUsage() ?? zeroUsage();
      this.phases.set(live, { phase: "failed", reason: failed, message: "sandbox ended before the restart" });
      await this.releaseWorkspace(live);
      return live.observation;
    }
    if (annotations?.[DELETE_AFTER_KEY]) {
      live.destroyed = live.layout.readUsage() ?? zeroUsage();
      live.finalUsage = live.destroyed;
      live.observation = { phase: "gone" };
      // A crash between marking and unmounting left it mounted.
      await this.releaseWorkspace(live);
      return live.observation;
    }
    const state = live.layout.readState();
    // An adopted warm sandbox has the uid it was started with, not the one its id gives.
    if (state?.uid) live.uid = state.uid;
    if (state && processStartTime(state.initPid) === state.initStartTime && state.initStartTime !== "") {
      // Still running from before the restart: adopt it. Not our child, so poll for its end.
      // Its workspace stays mounted across a restart; mounted again if something unmounted it.
      if (live.image) await this.mountWorkspace(live);
      live.workspace?.clearMark();
      this.attachIo(live, false);
      live.initPid = state.initPid;
      live.initStartTime = state.initStartTime;
      live.oomKillsSeen = live.cgroup.stats().oomKills;
      if (live.cgroup.isFrozen() && spec.pausedAt) {
        // Paused before the restart: it stays so (its max runtime not counting) until resumed, and is released
        // a full period after this start (when it was frozen is not recorded).
        live.pausedAt = spec.pausedAt.getTime();
        this.phases.set(live, { phase: "paused" });
        this.pauser.armRelease(live);
      } else {
        // Frozen while its record says running (a crash between the freeze and the record): it runs again.
        if (live.cgroup.isFrozen()) await live.cgroup.setFrozen(false);
        this.phases.set(live, { phase: "ready" });
        this.armDeadline(live);
      }
      live.livenessTimer = setInterval(() => {
        if (processStartTime(state.initPid) !== state.initStartTime) {
          clearInterval(live.livenessTimer);
          void this.onInitExit(live, null, null);
        }
      }, 500);
      live.livenessTimer.unref();
      return live.observation;
    }
    if (spec.pausedAt) {
      // Paused, and its processes gone (released before the restart, or ended with the service): it stays
      // paused on its workspace, and a resume starts it again there.
      if (live.image) await this.mountWorkspace(live);
      live.workspace?.clearMark();
      this.attachIo(live, false);
      await live.cgroup.killAll(2000);
      this.createCgroup(live);
      live.oomKillsSeen = live.cgroup.stats().oomKills;
      live.pausedAt = spec.pausedAt.getTime();
      live.released = true;
      this.phases.set(live, { phase: "paused" });
      return live.observation;
    }
    // Its processes are gone (host reboot, crash): the sandbox cannot be resumed.
    live.finalUsage = live.layout.readUsage() ?? currentUsage(live);
    await live.cgroup.killAll(2000);
    await live.cgroup.remove();
    markEnded(live, "lost", this.log);
    this.phases.set(live, {
      phase: "failed",
      reason: "lost",
      message: "sandbox processes not found after restart",
    });
    // Nothing runs on it any more (a killed service whose sandboxes died with
    // it left it mounted): its loop device goes; the image stays for the
    // session's next sandbox, mounted again should its files be asked for.
    await this.releaseWorkspace(live);
    return live.observation;
  }

  async observe(sandboxId: string): Promise<SandboxObservation> {
    return { ...this.get(sandboxId).observation };
  }

  waitSettled(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation> {
    return this.phases.waitSettled(this.get(sandboxId), signal);
  }

  onPhaseChange(listener: (sandboxId: string, observation: SandboxObservation) => void): () => void {
    return this.phases.onChange(listener);
  }

  async *exec(sandboxId: string, request: ExecRequest): AsyncGenerator<ExecEvent> {
    const live = this.get(sandboxId);
    if (live.observation.phase !== "ready" || !live.initPid) {
      throw PlatformError.failedPrecondition(`sandbox is ${live.observation.phase}`, ComputeReason.sandboxNotRunnable);
    }
    yield* runExec(live, request, { helper: this.helper, killGraceMs: this.killGraceMs, network: this.network });
  }

  async readFile(sandboxId: string, path: string, offset: number, maxBytes: number): Promise<ReadResult> {
    const live = await this.filesOf(sandboxId);
    const result = live.fs.read(path, offset, maxBytes);
    live.fileReadBytes += result.data.length;
    return result;
  }

  async writeFile(sandboxId: string, path: string, data: Uint8Array, append: boolean, mode: number): Promise<number> {
    const live = await this.filesOf(sandboxId);
    const n = live.fs.write(path, data, append, mode);
    live.fileWriteBytes += n;
    return n;
  }

  async listFiles(sandboxId: string, path: string, recursive: boolean, maxEntries: number): Promise<ListResult> {
    return (await this.filesOf(sandboxId)).fs.list(path, recursive, maxEntries);
  }

  async usage(sandboxId: string): Promise<Usage> {
    const live = this.get(sandboxId);
    // No flush here: DescribeSandbox is on the agents' path before each tool call, and
    // forcing a command's buffered writes out would make it wait for them.
    if (live.destroyed) return live.destroyed;
    return this.withNetwork(sandboxId, live.finalUsage ?? currentUsage(live));
  }

  /** Usage with the network totals of the egress proxy (0 for a sandbox that never had a policy). */
  private withNetwork(sandboxId: string, usage: Usage): Usage {
    if (!this.network) return usage;
    const n = this.network.counters(sandboxId);
    return { ...usage, networkEgressBytes: n.egressBytes, networkIngressBytes: n.ingressBytes };
  }

  /** A policy asked for at create: the driver needs its egress proxy. */
  private wireNetwork(spec: SandboxSpec): void {
    if (!spec.networkPolicy) return;
    if (!this.network)
      throw PlatformError.failedPrecondition(
        "this compute service has no egress proxy: sandboxes cannot have a network",
      );
    this.network.setPolicy(spec.sandboxId, spec.networkPolicy);
  }

  pause(sandboxId: string): Promise<void> {
    return this.pauser.pause(sandboxId);
  }

  resume(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation> {
    return this.pauser.resume(sandboxId, signal);
  }

  destroy(sandboxId: string): Promise<Usage> {
    // After a pause or resume in flight: a resume racing a destroy either thaws first or finds it stopping.
    return this.ops.run(sandboxId, () => this.destroyNow(sandboxId));
  }

  private async destroyNow(sandboxId: string): Promise<Usage> {
    const live = this.sandboxes.get(sandboxId) ?? (await this.recoverById(sandboxId));
    if (live.destroyed) return live.destroyed;
    // A sandbox that failed before has its totals already (taken at its failure, flushed).
    const running =
      live.observation.phase === "ready" ||
      live.observation.phase === "starting" ||
      live.observation.phase === "paused";
    live.stopping = "destroy";
    clearTimeout(live.deadlineTimer);
    clearTimeout(live.releaseTimer);
    clearInterval(live.livenessTimer);
    const usageBefore = live.finalUsage ?? currentUsage(live);
    await live.cgroup.killAll();
    if (live.child && live.child.exitCode === null && live.child.signalCode === null) {
      // A ref'd timer: the sandbox's child handle is unref'd, so without it the
      // event loop could end before the exit is delivered.
      await new Promise<void>((r) => {
        const timer = setTimeout(r, 2000);
        live.child?.once("exit", () => {
          clearTimeout(timer);
          r();
        });
      });
    }
    const total = this.withNetwork(sandboxId, live.finalUsage ?? usageBefore);
    await this.network?.forget(sandboxId);
    if (running && live.io) {
      // Its buffered writes count too: flushed before the last reading (its exit's usage was taken without).
      await this.flushIo(live);
      const disk = workspaceIo(live);
      if (disk) {
        total.diskReadBytes = disk.read;
        total.diskWriteBytes = disk.write;
      }
    }
    live.destroyed = total;
    live.finalUsage = total;
    live.layout.writeUsage(total);
    live.layout.writeAnnotations({ [DELETE_AFTER_KEY]: new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString() });
    // The image stays for the session's next sandbox, or for the grace window
    // (GC deletes it); its mount and loop device go now unless another sandbox of the session uses it.
    await this.releaseWorkspace(live);
    // A spare exec cgroup still being made would keep the sandbox's from being removed.
    await live.slots.settle();
    await live.cgroup.remove();
    this.phases.set(live, { phase: "gone" });
    return total;
  }

  async collectGarbage(now = new Date()): Promise<string[]> {
    await this.releaseOrphans();
    this.removeEndedCgroups();
    // Image trees no name and no sandbox holds any more (a name re-imported while a sandbox ran on the old tree).
    try {
      await this.dropUnnamedWarm();
      this.images.store.collect(this.imagesInUse(true));
    } catch (err) {
      this.log?.warn({ err }, "removing unused image trees failed");
    }
    const removed: string[] = [];
    for (const found of expiredWorkspaces(this.options.dataDir, now)) {
      const key = found.workspaceKey;
      // A session's workspace under its lock: a create taking it up again waits, or goes first and clears the mark.
      const gone = key
        ? await this.withWorkspaceLock(
            key,
            async () => this.workspaceUsers(key) === 0 && collectExpired(found.dir, now),
          )
        : await collectExpired(found.dir, now);
      if (gone) removed.push(found.name);
    }
    return removed;
  }

  /**
   * After the domain recovered every sandbox its store holds as live: any
   * other sandbox directory without a delete-after (its record ended while
   * no service watched it, or its recovery failed) is ended and marked
   * `lost`, and any session workspace no sandbox of this driver uses is
   * marked too, so GC collects them after the grace instead of never.
   * Returns the directories marked.
   */
  async reconcile(): Promise<string[]> {
    const marked: string[] = [];
    const when = new Date(Date.now() + SOFT_DELETE_GRACE_MS).toISOString();
    let names: string[] = [];
    try {
      names = fs.readdirSync(join(this.options.dataDir, "sandboxes")).filter((n) => !n.startsWith("."));
    } catch {}
    for (const name of names) {
      const layout = new SandboxLayout(this.options.dataDir, name);
      const phase = this.sandboxes.get(name)?.observation.phase;
      if (phase === "starting" || phase === "ready" || phase === "paused") continue;
      const annotations = layout.readAnnotations();
      if (annotations?.[DELETE_AFTER_KEY]) continue;
      try {
        const cgroup = this.root.child(name);
        await cgroup.killAll(2000);
        await cgroup.remove();
        await releaseImages(layout.image);
        layout.writeAnnotations({
          ...annotations,
          [DELETE_AFTER_KEY]: when,
          [ENDED_KEY]: annotations?.[ENDED_KEY] ?? "failed:lost",
        });
        marked.push(layout.dir);
      } catch (err) {
        this.log?.warn({ err, sandboxId: name }, "marking an unreachable sandbox directory for collection failed");
      }
    }
    let keys: string[] = [];
    try {
      keys = fs.readdirSync(join(this.options.dataDir, "workspaces"));
    } catch {}
    for (const key of keys) {
      await this.withWorkspaceLock(key, async () => {
        const dir = join(this.options.dataDir, "workspaces", key);
        if (this.workspaceUsers(key) > 0 || deleteAfterOf(dir)) return;
        try {
          writeJson(join(dir, "annotations.json"), { [DELETE_AFTER_KEY]: when });
          marked.push(dir);
        } catch (err) {
          this.log?.warn({ err, workspace: key }, "marking an unused workspace for collection failed");
        }
      });
    }
    if (marked.length > 0)
      this.log?.warn(
        { marked },
        "sandboxes and workspaces no live sandbox uses were left unmarked; marked for collection",
      );
    return marked;
  }

  async close(): Promise<void> {
    clearInterval(this.sampler);
    this.closed = true;
    const started = performance.now();
    const warm = [...this.warmPools.values()].reduce((n, pool) => n + pool.sandboxes.length, 0);
    await Promise.all([...this.warmPools.values()].map((pool) => pool.close()));
    const warmMs = performance.now() - started;
    const spares: Promise<void>[] = [];
    for (const live of this.sandboxes.values()) {
      clearTimeout(live.deadlineTimer);
      clearTimeout(live.releaseTimer);
      clearInterval(live.livenessTimer);
      // Its placed child goes first, or the cgroup cannot be removed.
      spares.push(live.slots.discard());
    }
    await Promise.all(spares);
    for (const live of this.sandboxes.values()) if (live.destroyed) live.cgroup.removeIfEmpty();
    // Sandboxes end with this process: they are ended now, so their cgroups can
    // go too (left for the exit to kill, every one stayed behind), their
    // workspaces unmounted and their loop devices detached. The next start
    // finds them lost.
    if (this.options.dieWithService) {
      // A few at a time: one process each, and a stop should not take 100 ms per sandbox.
      const lives = [...this.sandboxes.values()];
      for (let i = 0; i < lives.length; i += 8)
        await Promise.all(lives.slice(i, i + 8).map((live) => this.endWithService(live)));
    }
    await this.network?.close();
    await this.helper.close();
    if (this.options.dieWithService) await this.killUnwatched();
    this.root.removeIfEmpty();
    // A stop the launcher cuts short (SIGKILL after its grace) leaves what was not ended yet: the times say where it went.
    this.log?.info(
      {
        warm,
        warmMs: Math.round(warmMs),
        sandboxes: this.sandboxes.size,
        totalMs: Math.round(performance.now() - started),
      },
      "sandbox driver closed",
    );
  }

  /**
   * A create that was provisioning when close() began, or a launch this
   * process lost track of, can leave processes in a cgroup of one of this
   * data directory's sandboxes that no Live ends. They would outlive the
   * service (the launch chain has no parent-death signal of bwrap's own
   * until bwrap runs), so every such cgroup is emptied before the exit.
   */
  private async killUnwatched(): Promise<void> {
    let names: string[] = [];
    try {
      names = fs.readdirSync(join(this.options.dataDir, "sandboxes"));
    } catch {
      return;
    }
    for (const name of names) {
      const cgroup = this.root.child(name);
      if (cgroup.isEmpty()) continue;
      this.log?.warn({ sandboxId: name }, "ending the processes of a sandbox no longer watched before the exit");
      await cgroup.killAll(2000);
      cgroup.removeTreeSync();
    }
  }

  /** A sandbox is never started once close() began: nothing would end it. */
  private refuseIfClosed(): void {
    if (this.closed) throw PlatformError.unavailable("the compute service is stopping; try again");
  }

  /**
   * Where live's workspace is: the session's; or, for a sandbox made before
   * workspaces were per session, the image in its own directory, moved to
   * the session's place when the session has none yet (a rename: the mount
   * and loop device follow the inode) unless it was destroyed.
   */
  private locateWorkspace(live: Live, migrate: boolean): void {
    const ws = new SessionWorkspace(this.options.dataDir, live.spec.tenantId, live.spec.sessionId);
    const legacy = new WorkspaceImage(live.layout.image);
    if (legacy.exists() && migrate && !ws.exists()) {
      ws.prepare(live.layout.readState()?.uid ?? live.uid);
      fs.renameSync(legacy.file, ws.image);
    }
    // Without any image: made before workspace sizes were enforced, a plain directory.
    const image = legacy.exists() ? legacy : ws.exists() ? new WorkspaceImage(ws.image) : undefined;
    if (!image) return;
    if (image.file === ws.image) live.workspace = ws;
    live.image = image;
    live.workspaceDir = image.mountPoint();
  }

  /** Runs fn after every earlier holder of the session workspace's lock (create, release, GC of it). */
  private withWorkspaceLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
    return this.workspaceLocks.run(key, fn);
  }

  /** Sandboxes of this driver that use the workspace now (starting or ready), but `except`. */
  private workspaceUsers(key: string, except?: Live): number {
    let n = 0;
    for (const l of this.sandboxes.values()) {
      // One we are stopping (destroy, deadline, shutdown) no longer counts.
      if (l === except || l.workspace?.key !== key || l.destroyed || l.stopping) continue;
      if (l.observation.phase === "starting" || l.observation.phase === "ready" || l.observation.phase === "paused")
        n++;
    }
    return n;
  }

  /**
   * live no longer uses its workspace: when no other sandbox of the session
   * does, it is unmounted (its loop device goes) and marked for collection
   * after the grace, unless marked already. The image stays for the
   * session's next sandbox, which clears the mark.
   */
  private releaseWorkspace(live: Live): Promise<void> {
    const ws = live.workspace;
    if (!ws) return this.unmountWorkspace(live);
    return this.withWorkspaceLock(ws.key, () => this.releaseWorkspaceLocked(live));
  }

  private async releaseWorkspaceLocked(live: Live): Promise<void> {
    const ws = live.workspace;
    if (ws && this.workspaceUsers(ws.key, live) > 0) return;
    if (ws) this.markIfUnused(ws);
    await this.unmountWorkspace(live);
  }

  private markIfUnused(ws: SessionWorkspace): void {
    if (this.workspaceUsers(ws.key) > 0 || ws.deleteAfter()) return;
    try {
      ws.markDeleteAfter(new Date(Date.now() + SOFT_DELETE_GRACE_MS));
    } catch (err) {
      this.log?.warn({ err, workspace: ws.key }, "marking an unused workspace for collection failed");
    }
  }

  /** Deletes a workspace that never served a sandbox (its image unmounted and detached first). */
  private async removeWorkspaceDir(dir: string): Promise<void> {
    try {
      await releaseImages(dir);
      if (mountPointsUnder(dir).length === 0) await fs.promises.rm(dir, { recursive: true, force: true });
    } catch (err) {
      this.log?.warn({ err, dir }, "a workspace directory could not be removed");
    }
  }

  /** Ends a sandbox because the service stops and it is not to outlive it. */
  private async endWithService(live: Live): Promise<void> {
    if (!live.destroyed) {
      live.stopping ??= "shutdown";
      await live.cgroup.killAll(2000);
      await live.cgroup.remove();
    }
    await this.releaseWorkspace(live);
  }

  /**
   * Removes the cgroups of sandboxes that ended while no service of ours
   * watched them (killed with their service, or stopped before this fix):
   * empty ones whose sandbox has ended (its init no longer runs, or it is
   * marked for collection), or that have been empty for 10 minutes without a
   * sandbox here to claim them. A sandbox being made now (no state yet) and
   * any cgroup holding a process are left alone.
   */
  private removeEndedCgroups(): void {
    const removed: string[] = [];
    for (const name of this.root.childNames()) {
      const cgroup = this.root.child(name);
      // cgroup.procs, not pids.current: that still counts the zombies of a sandbox killed with its service.
      if (cgroup.pids().length > 0) continue;
      // Released (paused, no processes): its cgroup keeps its counters for the resume.
      if (this.sandboxes.get(name)?.released) continue;
      const layout = new SandboxLayout(this.options.dataDir, name);
      const state = layout.readState();
      const ended =
        (state !== undefined && processStartTime(state.initPid) !== state.initStartTime) ||
        layout.readAnnotations()?.[DELETE_AFTER_KEY] !== undefined ||
        cgroup.ageMs() > ABANDONED_CGROUP_MS;
      if (ended && cgroup.removeTreeSync()) removed.push(name);
    }
    if (removed.length > 0)
      this.log?.info(
        { removed: removed.length },
        "removed the cgroups of sandboxes that ended while no service watched them",
      );
  }

  /** Removes the exec socket directories killed services left in the temp directory. */
  private removeStaleSocketDirs(): void {
    try {
      const removed = removeStaleSocketDirs();
      if (removed.length > 0) this.log?.info({ removed }, "removed exec socket directories of killed services");
    } catch (err) {
      this.log?.warn({ err }, "looking for stale exec socket directories failed");
    }
  }

  /** The default image's warm pool (what `warm` was before pools per image; tests look into it). */
  private get warm(): { sandboxes: Live[] } {
    return this.warmPools.get(this.images.resolve("")?.digest ?? HOST_IMAGE) ?? { sandboxes: [] };
  }

  /** Whether a warm sandbox of this image is ready to be adopted (tests, diagnostics). */
  warmReady(image: string): boolean {
    const pool = this.warmPools.get(this.images.resolve(image)?.digest ?? HOST_IMAGE);
    return pool?.sandboxes.some((w) => w.observation.phase === "ready") ?? false;
  }

  /** The sandbox's cgroup, for tests and diagnostics. */
  cgroupOf(sandboxId: string): Cgroup {
    return this.get(sandboxId).cgroup;
  }

  // --- internals ---

  /**
   * Takes a started warm sandbox for spec: its directory and cgroup are
   * renamed to spec's id (the init's mounts and cgroup membership follow a
   * rename), spec's limits are applied, and it is READY at once. Only the
   * default mount path is prepared ahead.
   */
  private adoptWarm(spec: SandboxSpec, ws: SessionWorkspace, root: RootImage | undefined): boolean {
    if (spec.workspace.mountPath !== LIMITS.defaultMountPath) return false;
    const pool = this.warmPools.get(root?.digest ?? HOST_IMAGE);
    // An image used for the first time: one warm sandbox is kept for it from now on.
    if (!pool) {
      if ((this.options.warmSandboxes ?? 4) > 0 && !this.closed) this.warmPoolFor(root, 1).refill();
      return false;
    }
    const live = pool.take();
    if (!live) return false;
    const layout = new SandboxLayout(this.options.dataDir, spec.sandboxId);
    let cgroup: Cgroup;
    try {
      cgroup = live.cgroup.rename(spec.sandboxId);
      // The spare exec cgroup moved with its parent.
      live.slots.followRename(cgroup);
      live.cgroup = cgroup;
      fs.renameSync(live.layout.dir, layout.dir);
      live.layout = layout;
      // Its image becomes the session's workspace. The mount point is named
      // by the image's inode, which a rename keeps: it stays mounted where it was.
      ws.prepare(live.uid);
      fs.renameSync(layout.image, ws.image);
      live.image = new WorkspaceImage(ws.image);
      live.workspace = ws;
      cgroup.applyLimits({
        cpuMillis: spec.limits.cpuMillis,
        memoryBytes: spec.limits.memoryBytes,
        pidsMax: this.pidsMax,
      });
    } catch (err) {
      this.log?.warn({ err }, "adopting a warm sandbox failed; starting a new one");
      void pool.discard(live);
      return false;
    }
    live.spec = spec;
    live.warm = false;
    live.warmPool = undefined;
    live.memSampleSum = 0;
    live.memSamples = 0;
    this.attachIo(live, true);
    openFs(live);
    live.layout.writeState({
      bwrapPid: live.child?.pid ?? 0,
      initPid: live.initPid as number,
      initStartTime: live.initStartTime ?? "",
      uid: live.uid,
    });
    this.sandboxes.set(spec.sandboxId, live);
    this.armDeadline(live);
    this.phases.announce(live);
    return true;
  }

  /** The warm pool of an image (made with target sandboxes if there is none). */
  private warmPoolFor(root: RootImage | undefined, target: number): WarmPool<Live> {
    const key = root?.digest ?? HOST_IMAGE;
    const existing = this.warmPools.get(key);
    if (existing) return existing;
    const pool: WarmPool<Live> = new WarmPool(
      target,
      {
        newWarm: () => this.newWarm(root, pool),
        provision: (live) => this.provisionWarm(live),
        teardown: (live) => this.teardownWarm(live),
      },
      this.options.logger,
    );
    this.warmPools.set(key, pool);
    return pool;
  }

  /** Ends the warm sandboxes of an image (its tree is about to go). */
  private async dropWarm(digest: string): Promise<void> {
    const pool = this.warmPools.get(digest);
    if (!pool) return;
    this.warmPools.delete(digest);
    await pool.close();
  }

  /** Ends the warm pools of trees no name points to any more (a name imported again with other content). */
  private async dropUnnamedWarm(): Promise<void> {
    const named = new Set(this.images.store.list().map((i) => i.digest));
    await Promise.all(
      [...this.warmPools.keys()].filter((k) => k !== HOST_IMAGE && !named.has(k)).map((k) => this.dropWarm(k)),
    );
  }

  /** The default image was just stored: warm sandboxes start on it, none on the host's /usr any more. */
  private onImported(image: StoredImage): void {
    void this.dropUnnamedWarm();
    if (this.closed || this.images.store.find(this.images.defaultImage)?.digest !== image.digest) return;
    const hostPool = this.warmPools.get(HOST_IMAGE);
    const target = this.options.warmSandboxes ?? 4;
    if (hostPool) {
      this.warmPools.delete(HOST_IMAGE);
      void hostPool.close();
    }
    if (target > 0) this.warmPoolFor(this.images.resolve(""), target).refill();
  }

  /** Digests of the trees sandboxes run on (paused and starting ones too); with warm, warm ones as well. */
  private imagesInUse(warm: boolean): Set<string> {
    const digests = new Set<string>();
    for (const l of this.sandboxes.values())
      if (l.rootImage && !l.destroyed && l.observation.phase !== "failed" && l.observation.phase !== "gone")
        digests.add(l.rootImage.digest);
    if (warm)
      for (const [key, pool] of this.warmPools) if (key !== HOST_IMAGE && pool.sandboxes.length > 0) digests.add(key);
    return digests;
  }

  /** A sandbox for a warm pool; a random uid, as its id is not known yet. */
  private newWarm(root: RootImage | undefined, pool: WarmPool<Live>): Live {
    const spec: SandboxSpec = {
      sandboxId: `${WARM_PREFIX}${randomUUID()}`,
      tenantId: "",
      sessionId: "",
      image: root?.ref ?? "",
      workspace: { storageClass: "", size: "", mountPath: LIMITS.defaultMountPath },
      limits: {
        cpuMillis: LIMITS.defaultCpuMillis,
        memoryBytes: LIMITS.defaultMemoryBytes,
        maxRuntimeMs: LIMITS.maxMaxRuntimeMs,
      },
      createdAt: new Date(),
    };
    const live = this.newLive(spec, 0x10000000 + randomInt(1, 0xffffff));
    live.warm = true;
    live.rootImage = root;
    live.warmPool = pool;
    return live;
  }

  /** Makes a warm sandbox's workspace image (default size) and cgroup, then starts it. */
  private async provisionWarm(live: Live): Promise<void> {
    const { spec } = live;
    live.layout.prepare(spec, live.uid);
    await this.provisionWorkspace(live, live.layout.image, this.defaultWorkspaceBytes);
    this.createCgroup(live);
    // Closed meanwhile: close() is discarding it (after waiting for this).
    if (!this.closed) this.start(live);
  }

  /** Ends a warm sandbox that will not be used: its processes, cgroup, workspace and directory. */
  private async teardownWarm(live: Live): Promise<void> {
    // Still starting, its launcher may not have joined the cgroup yet: its process group goes too.
    if (live.child?.pid && live.child.exitCode === null && live.child.signalCode === null) {
      try {
        process.kill(-live.child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    await live.cgroup.killAll(2000);
    await live.slots.ready();
    await live.cgroup.remove();
    await this.removeSandboxDir(live.layout);
  }

  /**
   * Deletes a sandbox directory that will never be used again, its
   * workspace image unmounted and its loop device detached first.
   */
  private async removeSandboxDir(layout: SandboxLayout): Promise<void> {
    try {
      await releaseImages(layout.dir);
    } catch (err) {
      // Nothing is mounted under the data directory, so the directory still goes; a
      // mount of a deleted image is released by the next sweep (releaseOrphanedMounts).
      this.log?.warn({ err, dir: layout.dir }, "a workspace image could not be unmounted");
    }
    try {
      if (mountPointsUnder(layout.dir).length > 0) throw new Error("something is mounted under it");
      await fs.promises.rm(layout.dir, { recursive: true, force: true });
    } catch (err) {
      this.log?.warn({ err, dir: layout.dir }, "a sandbox directory could not be removed");
    }
  }

  /** Workspace mounts a killed service (this or another data directory) left behind: released, logged. */
  private async releaseOrphans(): Promise<void> {
    try {
      const released = await releaseOrphanedMounts();
      if (released.length > 0) this.log?.info({ released }, "released workspace mounts nobody will use again");
    } catch (err) {
      this.log?.warn({ err }, "looking for orphaned workspace mounts failed");
    }
  }

  /** Warm sandboxes of a previous run of the service were never handed out: remove them. */
  private async removeWarmLeftovers(): Promise<void> {
    let names: string[] = [];
    try {
      names = fs.readdirSync(join(this.options.dataDir, "sandboxes")).filter((n) => n.startsWith(WARM_PREFIX));
    } catch {
      return;
    }
    for (const name of names) {
      const cgroup = this.root.child(name);
      await cgroup.killAll(2000);
      await cgroup.remove();
      await this.removeSandboxDir(new SandboxLayout(this.options.dataDir, name));
    }
  }

  private newLive(spec: SandboxSpec, uid?: number): Live {
    return newLive({ dataDir: this.options.dataDir, root: this.root, helper: this.helper }, spec, uid);
  }

  private async recoverById(sandboxId: string): Promise<Live> {
    // Only sandboxes created or recovered by this process are known; the domain recovers all on start.
    throw PlatformError.notFound(`sandbox ${sandboxId} not found`, ComputeReason.sandboxNotFound);
  }

  /** Starts live's init; again: a released sandbox resumed (its disk counters go on from where they were). */
  private start(live: Live, again = false): void {
    const { spec, layout } = live;
    if (!live.warm && !again) this.attachIo(live, true);
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
    const root = live.rootImage;
    if (root) fs.mkdirSync(join(layout.dir, "rootfs"), { recursive: true, mode: 0o755 });
    LocalImages.record(layout.dir, root);
    const args = bwrapArgs({
      workspace: join(STAGE, "workspace"),
      etcDir: join(STAGE, "etc"),
      mountPath: spec.workspace.mountPath,
      seccompFd: SECCOMP_FD,
      imageRoot: root ? imageRootArgs(root.tree, join(STAGE, "rootfs"), spec.workspace.mountPath) : undefined,
    });
    if (this.options.dieWithService) args.unshift("--die-with-parent");
    // As root: shield the init from the OOM killer, make the mount namespace,
    // wait until the service has moved the launcher into the sandbox cgroup
    // (joinCgroup; never a sandbox process outside it: no limits there, and
    // nothing would find it to end it), then drop to the sandbox uid for good
    // and let bwrap build the namespaces.
    // Ending with the service: the parent-death signal is set by the first
    // process of the chain and kept through the uid change (which clears it),
    // so a service killed while a sandbox starts takes the launch with it,
    // not only a sandbox whose bwrap got as far as setting its own.
    const keepDeathSignal = this.options.dieWithService ? "--pdeathsig keep " : "";
    const bindRoot = root ? `mount --bind "$3" ${STAGE}/rootfs && ` : "";
    const inner = `mount --bind "$1" ${STAGE} && mount --bind "$2" ${STAGE}/workspace && ${bindRoot}umount -l ${MOUNTS_ROOT} && read -r joined <&${JOIN_FD} && [ "$joined" = joined ] && exec ${JOIN_FD}<&- && shift ${root ? 3 : 2} && exec ${SETPRIV} ${keepDeathSignal}--reuid=${live.uid} --regid=${live.uid} --clear-groups --inh-caps=-all --no-new-privs -- ${BWRAP} --info-fd 3 "$@"`;
    fs.mkdirSync(STAGE, { recursive: true, mode: 0o755 });
    const script = `echo -999 > /proc/self/oom_score_adj; exec ${UNSHARE} --mount --propagation private -- /bin/sh -c '${inner}' sh "$@"`;
    if (!this.seccompFilter) throw new Error("sandbox started before its seccomp filter was built");
    const launcher = this.options.dieWithService ? [SETPRIV, "--pdeathsig", "KILL", "--", "/bin/sh"] : ["/bin/sh"];
    const child = spawn(
      launcher[0] as string,
      [
        ...launcher.slice(1),
        "-c",
        script,
        "sh",
        layout.dir,
        live.workspaceDir,
        ...(root ? [root.tree] : []),
        ...args,
        "--",
        "/bin/sh",
        "-c",
        "echo ready >&4; exec 4>&-; exec /bin/sleep infinity",
      ],
      {
        env: baseEnv(spec.workspace.mountPath),
        stdio: ["ignore", "ignore", "pipe", "pipe", "pipe", "pipe", "pipe"],
        detached: true, // own process group: survives a restart of the service, re-attached by recover()
      },
    );
    // bwrap reads the filter to its end from this descriptor (and closes it before the init runs).
    const filter = child.stdio.at(SECCOMP_FD) as Writable | null | undefined;
    filter?.on("error", () => {}); // bwrap gone before reading: the exit handler reports the start failure
    filter?.end(this.seccompFilter);
    live.child = child;
    this.joinCgroup(live, child);
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
      this.phases.set(live, { phase: "ready" });
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
      this.log?.error({ err, sandboxId: spec.sandboxId }, "sandbox spawn failed");
      this.phases.set(live, { phase: "failed", reason: "start_error", message: err.message });
    });
    child.on("exit", (code, signal) => {
      // The init of before a release: its end was asked for.
      if (live.child !== child) return;
      if (live.observation.phase === "starting" && code !== 0) {
        this.log?.error({ sandboxId: spec.sandboxId, code, stderr }, "sandbox failed to start");
      }
      void this.onInitExit(live, code, signal);
    });
    child.unref();
    (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();
  }

  /**
   * Moves the launcher into live's cgroup while it makes its mount namespace
   * (as root, nothing of the sandbox running yet), then tells it to go on to
   * setpriv and bwrap; it goes on only on "joined" (a failed move closes the
   * pipe, and so does the service's end). The first move into a cgroup after a
   * quiet spell waits for an RCU grace period (cgroup v1 without
   * favordynmods: ~13 ms here, a third of a released sandbox's resume), which
   * the launcher's own work now overlaps instead of following.
   */
  private joinCgroup(live: Live, child: ChildProcess): void {
    const gate = child.stdio.at(JOIN_FD) as Writable | null | undefined;
    gate?.on("error", () => {}); // the launcher gone: its exit handler reports the start failure
    const pid = child.pid;
    const move = async () => {
      if (!gate || !pid) throw new Error("no launcher to move");
      // Only while it runs: the pid of one that ended could be another process's by the time it is written.
      const write = (file: string) => {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error("the launcher ended");
        return fs.promises.writeFile(file, `${pid}\n`);
      };
      const [first, ...rest] = live.cgroup.procsFiles();
      if (first) await write(first); // the grace period, if any, off the event loop
      await Promise.all(rest.map(write)); // the others are quick after it
      // A destroy meanwhile ended what was in the cgroup then, not this launcher: it must not go on.
      if (live.stopping) throw new Error(`the sandbox is stopping (${live.stopping})`);
      gate.end("joined\n");
    };
    move().catch((err) => {
      if (child.exitCode === null && child.signalCode === null && !live.stopping)
        this.log?.warn({ err, sandboxId: live.spec.sandboxId }, "moving a sandbox's launcher into its cgroup failed");
      gate?.destroy();
    });
  }

  private async onInitExit(live: Live, code: number | null, signal: NodeJS.Signals | null): Promise<void> {
    if (live.warm) {
      if (!this.closed) this.log?.warn({ code, signal }, "a warm sandbox exited before it was used");
      await live.warmPool?.discard(live);
      return;
    }
    clearTimeout(live.deadlineTimer);
    clearInterval(live.livenessTimer);
    void this.network?.stop(live.spec.sandboxId);
    // Ended by a release (a paused sandbox giving its memory back): it stays paused.
    if (live.stopping === "release") return;
    // A closed driver watches nothing: the next one finds how the sandbox ended (recover).
    if (this.closed && live.stopping !== "shutdown") return;
    if (live.stopping === "destroy" || live.stopping === "shutdown") {
      live.finalUsage = currentUsage(live);
      return;
    }
    // Whatever remains (execs) goes with the sandbox, as in a pod.
    await this.flushIo(live);
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
    markEnded(live, reason, this.log);
    // Its loop device goes too; the files stay for the session's next sandbox.
    await this.releaseWorkspace(live);
    this.phases.set(live, {
      phase: "failed",
      reason,
      exitCode: code ?? (signal ? 128 + signalNumber(signal) : undefined),
    });
  }

  private armDeadline(live: Live): void {
    clearTimeout(live.deadlineTimer);
    // max_runtime counts running time: the pauses that ended are left out.
    const remaining = live.spec.createdAt.getTime() + live.spec.limits.maxRuntimeMs + live.pausedMs - Date.now();
    live.deadlineTimer = setTimeout(
      () => {
        live.stopping = "deadline";
        this.log?.info({ sandboxId: live.spec.sandboxId }, "sandbox reached max_runtime");
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
  private createCgroup(live: Live): void {
    const { limits } = live.spec;
    live.cgroup.create({ cpuMillis: limits.cpuMillis, memoryBytes: limits.memoryBytes, pidsMax: this.pidsMax });
  }

  private get(sandboxId: string): Live {
    const live = this.sandboxes.get(sandboxId);
    if (!live) throw PlatformError.notFound(`sandbox ${sandboxId} not found`, ComputeReason.sandboxNotFound);
    return live;
  }

  /** Files stay reachable while the workspace exists (also for a failed sandbox), not after destroy. */
  private async filesOf(sandboxId: string): Promise<Live> {
    const live = this.get(sandboxId);
    if (live.destroyed) {
      throw PlatformError.failedPrecondition("sandbox is destroyed", ComputeReason.sandboxNotRunnable);
    }
    if (!live.fs && live.observation.phase === "starting") {
      throw PlatformError.failedPrecondition("sandbox is starting", ComputeReason.sandboxNotRunnable);
    }
    // Never write into the bare mount point: the workspace is the mounted
    // image (a stat pair per call says it still is).
    if (live.image && !workspaceMounted(live.workspaceDir)) {
      try {
        await this.mountWorkspace(live);
      } catch (err) {
        throw PlatformError.internal("workspace I/O failed: the workspace could not be mounted", err);
      }
    }
    if (!live.fs) openFs(live);
    return live;
  }

  /** Size in bytes of spec's workspace (the driver's default when unset); INVALID_ARGUMENT when malformed. */
  private workspaceBytes(spec: SandboxSpec): number {
    return spec.workspace.size ? workspaceSizeBytes(spec.workspace.size) : this.defaultWorkspaceBytes;
  }

  /** A new workspace image of sizeBytes at file for live, owned by its uid, mounted at its workspace directory. */
  private async provisionWorkspace(live: Live, file: string, sizeBytes: number): Promise<void> {
    const image = new WorkspaceImage(file);
    live.workspaceDir = await image.create(
      sizeBytes,
      { uid: live.uid, gid: live.uid },
      { endsWithProcess: this.options.dieWithService },
    );
    live.image = image;
  }

  /** Mounts live's workspace image if it is not mounted (after a restart, or unmounted by hand). */
  private async mountWorkspace(live: Live): Promise<void> {
    const image = live.image as WorkspaceImage;
    if (!image.exists()) throw new Error(`workspace image ${image.file} is missing`);
    live.workspaceDir = await image.mount({ endsWithProcess: this.options.dieWithService });
  }

  /**
   * Finds the disk counters of live's workspace. fresh: the sandbox starts
   * now, its usage counts from here; otherwise (re-attached after a restart)
   * from the values recorded when it started, if the device is the same.
   */
  private attachIo(live: Live, fresh: boolean): void {
    const io = live.image ? WorkspaceIo.of(live.image.file) : undefined;
    const now = io?.read();
    if (!io || !now) return;
    const saved = fresh ? undefined : live.layout.readIoBase();
    live.io = io;
    if (saved && saved.device === io.device && saved.read <= now.read && saved.write <= now.write) {
      live.ioBase = { read: saved.read, write: saved.write };
      return;
    }
    live.ioBase = now;
    try {
      live.layout.writeIoBase({ device: io.device, ...now });
    } catch (err) {
      this.log?.warn({ err, sandboxId: live.spec.sandboxId }, "recording the workspace's disk counters failed");
    }
  }

  /** Flushes live's workspace so its counters include buffered writes; logged, not thrown. */
  private async flushIo(live: Live): Promise<void> {
    if (!live.io || !workspaceMounted(live.workspaceDir)) return;
    try {
      await flushWorkspace(live.workspaceDir);
    } catch (err) {
      this.log?.warn({ err, sandboxId: live.spec.sandboxId }, "flushing a workspace for its disk counters failed");
    }
  }

  /** Unmounts live's workspace (its image stays); logged, not thrown: GC retries. */
  private async unmountWorkspace(live: Live): Promise<void> {
    if (!live.image) return;
    try {
      await live.image.unmount();
    } catch (err) {
      this.log?.warn({ err, sandboxId: live.spec.sandboxId }, "unmounting a workspace failed; GC will retry");
    }
  }

  private sample(): void {
    for (const live of this.sandboxes.values()) {
      if (live.observation.phase !== "ready") continue;
      // One counter per cgroup: with hundreds of idle sandboxes, reading every
      // counter each period was a good part of this process's CPU.
      live.memSampleSum += live.cgroup.memoryBytes();
      live.memSamples++;
      for (const run of live.execs) {
        run.memSampleSum += run.cgroup.memoryBytes();
        run.memSamples++;
      }
    }
  }
}

/** Whether a workspace image is mounted at dir (a mount point under MOUNTS_ROOT has another device than it). */
function workspaceMounted(dir: string): boolean {
  const st = fs.statSync(dir, { throwIfNoEntry: false });
  return st !== undefined && st.dev !== fs.statSync(MOUNTS_ROOT).dev;
}
