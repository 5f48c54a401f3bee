import * as fs from "node:fs";
import { join } from "node:path";
import { ComputeReason, PlatformError } from "@platform/errors";
import type { NetworkPolicy } from "@platform/network-policy";
import type { Logger } from "pino";
import {
  type ExecEvent,
  type ExecRequest,
  KILL_GRACE_MS,
  type ListResult,
  type ReadResult,
  type SandboxDriver,
  type SandboxObservation,
  type SandboxSpec,
  type Usage,
} from "../../driver.ts";
import type { EgressProxy } from "../../egress/proxy.ts";
import { KeyedLock } from "../../keyed-lock.ts";
import { LIMITS } from "../../service/limits.ts";
import { workspaceSizeBytes } from "../../service/workspace-size.ts";
import { type Cgroup, detectCgroups } from "./cgroups.ts";
import { createSandbox } from "./create.ts";
import { destroySandbox, type EndDeps, endWithService } from "./destroy.ts";
import { favorDynamicCgroupMods } from "./dynmods.ts";
import { ExecHelper, type HelperBuild } from "./exec-helper.ts";
import { runExec } from "./exec-run.ts";
import { ExecAftermath } from "./exec-aftermath.ts";
import { Housekeeping } from "./housekeeping.ts";
import { ImageStore, LocalImages } from "./images/index.ts";
import { buildLaunchHelper, buildSandboxInit, Launcher } from "./launch.ts";
import { type Live, newLive, openFs } from "./live.ts";
import { Pauser } from "./pause.ts";
import { Phases } from "./phases.ts";
import { recoverSandbox } from "./recover.ts";
import { SandboxNetwork } from "./sandbox-network.ts";
import { recordReleased } from "./spare-cgroup.ts";
import { currentUsage, withNetwork } from "./usage.ts";
import { Turns } from "./turns.ts";
import { WarmSandboxes } from "./warm-sandboxes.ts";
import { Workspaces, workspaceMounted } from "./workspaces.ts";

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
  /**
   * Start sandboxes through the launch helper (launch-helper.c, built with cc
   * at first use): the private mount namespace, its bind mounts and the drop
   * to the sandbox uid in one process (default). Off, or where it cannot be
   * built, through the shell chain (sh, unshare, mount, umount, setpriv) that
   * does the same with an exec per step.
   */
  launchHelper?: boolean;
}

/** How long a paused sandbox keeps its processes (frozen) before they are ended; see LocalDriverOptions. */
const RELEASE_PAUSED_AFTER_MS = 60_000;
/**
 * How long an ended exec's cleanup waits at most for the driver's other execs
 * (ExecAftermath): about what a burst of 100 short execs takes here, and less
 * than a session's next tool call after a model's turn usually waits, so its
 * sandbox's next slot is ready for it.
 */
export const AFTERMATH_HOLD_MS = 500;

/** Ready sandboxes whose memory one sampler tick reads at most (sample()). */
const SAMPLE_BATCH = 50;

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
  private readonly aftermath = new ExecAftermath(AFTERMATH_HOLD_MS);
  private readonly pidsMax: number;
  private readonly root: Cgroup;
  private readonly sampler: NodeJS.Timeout;
  /** The sandboxes in turn, SAMPLE_BATCH a sampler tick (sample()). */
  private readonly sampleTurns = new Turns(this.sandboxes);
  private readonly log?: Logger;
  private readonly helper: ExecHelper;
  /**
   * The built helper and seccomp filter. Without them no sandbox starts: the
   * filter is what every sandbox process runs under, and only the helper can
   * install it in an exec (there is no fallback without it).
   */
  private readonly built: Promise<HelperBuild>;
  private seccompFilter?: Buffer;
  /** The built launch helper, once `built` resolved; undefined: the shell chain. */
  private launchHelper?: string;
  /** The built sandbox init (sandbox-init.c), once `built` resolved; undefined: a shell is the init. */
  private sandboxInit?: string;
  /** Sandboxes started ahead, per image. */
  private readonly warmSandboxes: WarmSandboxes;
  private readonly housekeeping: Housekeeping;
  /** The image store and what `image` means here (images/). */
  readonly images: LocalImages;
  private readonly workspaces: Workspaces;
  private readonly defaultWorkspaceBytes: number;
  private closed = false;
  /** Pause, resume and destroy of one sandbox run one at a time. */
  private readonly ops = new KeyedLock();
  /** Present with an egress proxy: sandboxes may then have a network policy. */
  private readonly network?: SandboxNetwork;
  setNetworkPolicy?: (sandboxId: string, policy: NetworkPolicy | undefined) => Promise<void>;
  private readonly launcher: Launcher<Live>;
  private readonly pauser: Pauser<Live>;
  private readonly ending: EndDeps;

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
    this.workspaces = new Workspaces({
      dataDir: options.dataDir,
      dieWithService: options.dieWithService,
      sandboxes: () => this.sandboxes.values(),
      log: options.logger,
    });
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
    this.launcher = new Launcher<Live>({
      dieWithService: options.dieWithService,
      launchHelper: () => this.launchHelper,
      sandboxInit: () => this.sandboxInit,
      pidsMax: this.pidsMax,
      root: this.root,
      seccompFilter: () => this.seccompFilter,
      isClosed: () => this.closed,
      setPhase: (live, observation) => this.phases.set(live, observation),
      discardWarm: async (live) => live.warmPool?.discard(live),
      warmHeld: (live) => live.warmPool?.holds(live) ?? false,
      workspaces: this.workspaces,
      network: this.network,
      log: options.logger,
    });
    this.ending = {
      network: this.network,
      workspaces: this.workspaces,
      setPhase: (live, observation) => this.phases.set(live, observation),
    };
    this.pauser = new Pauser<Live>({
      ops: this.ops,
      get: (id) => this.get(id),
      setPhase: (live, observation) => this.phases.set(live, observation),
      waitSettled: (live, signal) => this.phases.waitSettled(live, signal),
      armDeadline: (live) => this.launcher.armDeadline(live),
      startAgain: (live) => {
        this.refuseIfClosed();
        // In the spare launcher's cgroup, or its own made again as it was (launch.ts).
        this.launcher.start(live, true);
      },
      prepareStart: () => this.launcher.prepareSpare(),
      released: (live) => recordReleased(live),
      network: this.network,
      releaseAfterMs: options.releasePausedAfterMs ?? RELEASE_PAUSED_AFTER_MS,
      log: options.logger,
    });
    this.housekeeping = new Housekeeping({
      dataDir: options.dataDir,
      root: this.root,
      sandbox: (id) => this.sandboxes.get(id),
      ownsCgroup: (name) => this.launcher.ownsCgroup(name),
      workspaces: this.workspaces,
      collectImages: async () => {
        await this.warmSandboxes.dropUnnamed();
        this.images.store.collect(this.imagesInUse(true));
      },
      log: options.logger,
    });
    this.housekeeping.removeEndedCgroups();
    this.sampler = setInterval(() => this.sample(), options.sampleIntervalMs ?? 200);
    this.sampler.unref();
    this.helper = new ExecHelper(options.logger);
    // Built alongside the exec helper (both at once, before any sandbox starts); not built: the shell chain.
    const launchHelper =
      options.launchHelper === false
        ? Promise.resolve(undefined)
        : buildLaunchHelper().catch((err: Error) => {
            this.log?.warn({ err }, "the launch helper was not built: sandboxes start through the shell chain");
            return undefined;
          });
    const sandboxInit = buildSandboxInit().catch((err: Error) => {
      this.log?.warn({ err }, "the sandbox init was not built: sandboxes start with a shell as their init");
      return undefined;
    });
    this.built = Promise.all([this.helper.build(), launchHelper, sandboxInit]).then(([b, launch, init]) => {
      this.seccompFilter = b.seccompFilter;
      this.launchHelper = launch;
      this.sandboxInit = init;
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
        dropWarm: (digest) => this.warmSandboxes.drop(digest),
        imported: (image) => this.warmSandboxes.onImported(image),
      },
      options.logger,
      options.refuseUnknownImages ?? false,
    );
    this.images.logUnstoredDefault();
    this.defaultWorkspaceBytes = workspaceSizeBytes(
      options.defaultWorkspaceSize ?? LIMITS.defaultWorkspaceSize,
      "defaultWorkspaceSize",
    );
    this.warmSandboxes = new WarmSandboxes({
      dataDir: options.dataDir,
      target: options.warmSandboxes ?? 4,
      defaultWorkspaceBytes: this.defaultWorkspaceBytes,
      pidsMax: this.pidsMax,
      root: this.root,
      images: this.images,
      isClosed: () => this.closed,
      newLive: (spec, uid) => this.newLive(spec, uid),
      launcher: this.launcher,
      workspaces: this.workspaces,
      adopted: (live) => {
        this.sandboxes.set(live.spec.sandboxId, live);
        this.launcher.armDeadline(live);
        this.phases.announce(live);
      },
      log: options.logger,
    });
    void this.warmSandboxes
      .removeLeftovers()
      .then(() => this.housekeeping.releaseOrphans())
      .then(() => this.housekeeping.removeStaleSocketDirs())
      // Once more a little later: a sandbox killed with its service keeps its cgroup busy until its zombies are reaped.
      .then(() => setTimeout(() => this.housekeeping.removeEndedCgroups(), 2000).unref())
      .then(() => this.built)
      .then(
        () => this.warmSandboxes.refill(),
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
    await createSandbox(
      {
        dataDir: this.options.dataDir,
        defaultWorkspaceBytes: this.defaultWorkspaceBytes,
        known: (id) => this.sandboxes.has(id),
        register: (live) => this.sandboxes.set(live.spec.sandboxId, live),
        forget: (id) => this.sandboxes.delete(id),
        newLive: (s, uid) => this.newLive(s, uid),
        adoptWarm: (s, ws, root) => this.warmSandboxes.adopt(s, ws, root),
        refuseIfClosed: () => this.refuseIfClosed(),
        workspaces: this.workspaces,
        launcher: this.launcher,
      },
      spec,
      root,
      sizeBytes,
    );
  }

  async recover(spec: SandboxSpec): Promise<SandboxObservation> {
    const existing = this.sandboxes.get(spec.sandboxId);
    if (existing) return existing.observation;
    return recoverSandbox(
      {
        newLive: (s) => this.newLive(s),
        register: (live) => this.sandboxes.set(live.spec.sandboxId, live),
        network: this.network,
        workspaces: this.workspaces,
        setPhase: (live, observation) => this.phases.set(live, observation),
        launcher: this.launcher,
        pauser: this.pauser,
        log: this.log,
      },
      spec,
    );
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
    yield* runExec(live, request, {
      helper: this.helper,
      killGraceMs: this.killGraceMs,
      network: this.network,
      aftermath: this.aftermath,
    });
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
    return withNetwork(live.finalUsage ?? currentUsage(live), this.network?.counters(sandboxId));
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

  async resume(sandboxId: string, signal?: AbortSignal): Promise<SandboxObservation> {
    // A released sandbox starts again, which needs the helpers and the seccomp filter (a resume right after a
    // restart came before them and failed); not built at all: the start says so.
    if (!this.seccompFilter) await this.built.catch(() => {});
    return this.pauser.resume(sandboxId, signal);
  }

  destroy(sandboxId: string): Promise<Usage> {
    // After a pause or resume in flight: a resume racing a destroy either thaws first or finds it stopping.
    return this.ops.run(sandboxId, () => this.destroyNow(sandboxId));
  }

  private async destroyNow(sandboxId: string): Promise<Usage> {
    const live = this.sandboxes.get(sandboxId) ?? (await this.recoverById(sandboxId));
    return destroySandbox(this.ending, live);
  }

  collectGarbage(now = new Date()): Promise<string[]> {
    return this.housekeeping.collectGarbage(now);
  }

  /**
   * After the domain recovered every sandbox its store holds as live: any
   * other sandbox directory without a delete-after is ended and marked
   * `lost`, and any session workspace no sandbox uses is marked too
   * (housekeeping.ts). Returns the directories marked.
   */
  reconcile(): Promise<string[]> {
    return this.housekeeping.reconcile();
  }

  async close(): Promise<void> {
    clearInterval(this.sampler);
    this.closed = true;
    this.aftermath.close();
    const launcherClosed = this.launcher.close();
    const started = performance.now();
    const warm = await this.warmSandboxes.close();
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
        await Promise.all(lives.slice(i, i + 8).map((live) => endWithService(this.ending, live)));
    }
    await this.network?.close();
    await this.helper.close();
    if (this.options.dieWithService) await this.housekeeping.killUnwatched();
    await launcherClosed;
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

  /** A sandbox is never started once close() began: nothing would end it. */
  private refuseIfClosed(): void {
    if (this.closed) throw PlatformError.unavailable("the compute service is stopping; try again");
  }

  /** The default image's warm pool (what `warm` was before pools per image; tests look into it). */
  private get warm(): { sandboxes: Live[] } {
    return this.warmSandboxes.defaultPool;
  }

  /** Whether a warm sandbox of this image is ready to be adopted (tests, diagnostics). */
  warmReady(image: string): boolean {
    return this.warmSandboxes.ready(image);
  }

  /** The sandbox's cgroup, for tests and diagnostics. */
  cgroupOf(sandboxId: string): Cgroup {
    return this.get(sandboxId).cgroup;
  }

  /** Digests of the trees sandboxes run on (paused and starting ones too); with warm, warm ones as well. */
  private imagesInUse(warm: boolean): Set<string> {
    const digests = new Set<string>();
    for (const l of this.sandboxes.values())
      if (l.rootImage && !l.destroyed && l.observation.phase !== "failed" && l.observation.phase !== "gone")
        digests.add(l.rootImage.digest);
    if (warm) for (const digest of this.warmSandboxes.held()) digests.add(digest);
    return digests;
  }

  private newLive(spec: SandboxSpec, uid?: number): Live {
    return newLive({ dataDir: this.options.dataDir, root: this.root, helper: this.helper }, spec, uid);
  }

  private async recoverById(sandboxId: string): Promise<Live> {
    // Only sandboxes created or recovered by this process are known; the domain recovers all on start.
    throw PlatformError.notFound(`sandbox ${sandboxId} not found`, ComputeReason.sandboxNotFound);
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
        await this.workspaces.mount(live);
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

  /**
   * Reads the memory of every running exec, and of at most SAMPLE_BATCH
   * ready sandboxes, taken in turn from where the last tick stopped: each is
   * sampled every ceil(ready / SAMPLE_BATCH) ticks, its average as unbiased.
   * Every sandbox each tick was 14 ms of the event loop every 200 ms with 500
   * ready (a read is ~16 us here), on the path of whatever request came then.
   */
  private sample(): void {
    // One counter per cgroup: with hundreds of idle sandboxes, reading every
    // counter each period was a good part of this process's CPU.
    for (const live of this.sandboxes.values()) {
      if (live.observation.phase !== "ready") continue;
      for (const run of live.execs) {
        run.memSampleSum += run.cgroup.memoryBytes();
        run.memSamples++;
      }
    }
    for (const live of this.sampleTurns.take(SAMPLE_BATCH, (l) => l.observation.phase === "ready")) {
      live.memSampleSum += live.cgroup.memoryBytes();
      live.memSamples++;
    }
  }
}
