import { randomInt, randomUUID } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import type { Logger } from "pino";
import type { SandboxSpec } from "../../driver.ts";
import { LIMITS } from "../../service/limits.ts";
import type { Cgroup } from "./cgroups.ts";
import { HOST_IMAGE, type LocalImages, type RootImage, type StoredImage } from "./images/index.ts";
import type { Launcher } from "./launch.ts";
import { type Live, openFs } from "./live.ts";
import { SandboxLayout } from "./sandbox-layout.ts";
import type { SessionWorkspace } from "./session-workspace.ts";
import { WARM_PREFIX, WarmPool } from "./warm-pool.ts";
import { WorkspaceImage } from "./workspace-image.ts";
import type { Workspaces } from "./workspaces.ts";

/** What the warm sandboxes need of the rest of the driver. */
export interface WarmDeps {
  dataDir: string;
  /** The default image's pool size (the driver's warmSandboxes); 0: no warm sandboxes for any image. */
  target: number;
  /** Warm sandboxes are made with the default workspace size: only creates asking for it adopt one. */
  defaultWorkspaceBytes: number;
  /** Process cap applied to an adopted sandbox's cgroup with its spec's limits. */
  pidsMax: number;
  /** The driver's cgroup, where leftovers of a previous run are found. */
  root: Cgroup;
  images: Pick<LocalImages, "resolve" | "store" | "defaultImage">;
  isClosed(): boolean;
  /** A Live for spec with this uid (a warm one's id, and so its uid, is not known ahead). */
  newLive(spec: SandboxSpec, uid: number): Live;
  launcher: Pick<Launcher<Live>, "createCgroup" | "start">;
  workspaces: Pick<Workspaces, "provision" | "removeSandboxDir" | "attachIo">;
  /** An adopted sandbox is the driver's from now on: known by its id, its deadline armed, READY to the listeners. */
  adopted(live: Live): void;
  log?: Logger;
}

/**
 * The sandboxes started ahead, one pool per image (digest, or `host`): the
 * default image's, and one sandbox kept for each image once used. How a
 * warm sandbox is made, adopted by a create and ended lives here; how many a
 * pool keeps, in warm-pool.ts.
 */
export class WarmSandboxes {
  private readonly pools = new Map<string, WarmPool<Live>>();

  constructor(private readonly deps: WarmDeps) {
    this.poolFor(deps.images.resolve(""), deps.target);
  }

  /** The default image's warm pool (what the driver's `warm` was before pools per image; tests look into it). */
  get defaultPool(): { sandboxes: Live[] } {
    return this.pools.get(this.deps.images.resolve("")?.digest ?? HOST_IMAGE) ?? { sandboxes: [] };
  }

  /** Whether a warm sandbox of this image is ready to be adopted. */
  ready(image: string): boolean {
    const pool = this.pools.get(this.deps.images.resolve(image)?.digest ?? HOST_IMAGE);
    return pool?.sandboxes.some((w) => w.observation.phase === "ready") ?? false;
  }

  /** Starts every pool's sandboxes up to its target. */
  refill(): void {
    for (const pool of this.pools.values()) pool.refill();
  }

  /**
   * Takes a started warm sandbox for spec: its directory and cgroup are
   * renamed to spec's id (the init's mounts and cgroup membership follow a
   * rename), spec's limits are applied, and it is READY at once. Only the
   * default mount path is prepared ahead.
   */
  adopt(spec: SandboxSpec, ws: SessionWorkspace, root: RootImage | undefined): boolean {
    if (spec.workspace.mountPath !== LIMITS.defaultMountPath) return false;
    const pool = this.pools.get(root?.digest ?? HOST_IMAGE);
    // An image used for the first time: one warm sandbox is kept for it from now on.
    if (!pool) {
      if (this.deps.target > 0 && !this.deps.isClosed()) this.poolFor(root, 1).refill();
      return false;
    }
    const live = pool.take();
    if (!live) return false;
    const layout = new SandboxLayout(this.deps.dataDir, spec.sandboxId);
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
        pidsMax: this.deps.pidsMax,
      });
    } catch (err) {
      this.deps.log?.warn({ err }, "adopting a warm sandbox failed; starting a new one");
      void pool.discard(live);
      return false;
    }
    live.spec = spec;
    live.warm = false;
    live.warmPool = undefined;
    live.memSampleSum = 0;
    live.memSamples = 0;
    // Its place is refilled once its first command ended (or after the pool's delay, whichever
    // comes first): the refill forks this process twice (the image's mkfs and mount, the launch),
    // which on a fixed delay landed in the middle of the next create and its first exec.
    live.afterExec = () => pool.refill();
    this.deps.workspaces.attachIo(live, true);
    openFs(live);
    live.layout.writeState({
      bwrapPid: live.child?.pid ?? 0,
      initPid: live.initPid as number,
      initStartTime: live.initStartTime ?? "",
      uid: live.uid,
    });
    this.deps.adopted(live);
    return true;
  }

  /** Ends the warm sandboxes of an image (its tree is about to go). */
  async drop(digest: string): Promise<void> {
    const pool = this.pools.get(digest);
    if (!pool) return;
    this.pools.delete(digest);
    await pool.close();
  }

  /** Ends the warm pools of trees no name points to any more (a name imported again with other content). */
  async dropUnnamed(): Promise<void> {
    const named = new Set(this.deps.images.store.list().map((i) => i.digest));
    await Promise.all([...this.pools.keys()].filter((k) => k !== HOST_IMAGE && !named.has(k)).map((k) => this.drop(k)));
  }

  /** The default image was just stored: warm sandboxes start on it, none on the host's /usr any more. */
  onImported(image: StoredImage): void {
    void this.dropUnnamed();
    const { images } = this.deps;
    if (this.deps.isClosed() || images.store.find(images.defaultImage)?.digest !== image.digest) return;
    const hostPool = this.pools.get(HOST_IMAGE);
    if (hostPool) {
      this.pools.delete(HOST_IMAGE);
      void hostPool.close();
    }
    if (this.deps.target > 0) this.poolFor(images.resolve(""), this.deps.target).refill();
  }

  /** Digests of the image trees warm sandboxes hold (the host's /usr is none). */
  held(): string[] {
    return [...this.pools].filter(([key, pool]) => key !== HOST_IMAGE && pool.sandboxes.length > 0).map(([k]) => k);
  }

  /** Ends every warm sandbox; none is started again. Returns how many there were. */
  async close(): Promise<number> {
    const pools = [...this.pools.values()];
    const n = pools.reduce((sum, pool) => sum + pool.sandboxes.length, 0);
    await Promise.all(pools.map((pool) => pool.close()));
    return n;
  }

  /** Warm sandboxes of a previous run of the service were never handed out: remove them. */
  async removeLeftovers(): Promise<void> {
    let names: string[] = [];
    try {
      names = fs.readdirSync(join(this.deps.dataDir, "sandboxes")).filter((n) => n.startsWith(WARM_PREFIX));
    } catch {
      return;
    }
    for (const name of names) {
      const cgroup = this.deps.root.child(name);
      await cgroup.killAll(2000);
      await cgroup.remove();
      await this.deps.workspaces.removeSandboxDir(new SandboxLayout(this.deps.dataDir, name));
    }
  }

  /** The warm pool of an image (made with target sandboxes if there is none). */
  private poolFor(root: RootImage | undefined, target: number): WarmPool<Live> {
    const key = root?.digest ?? HOST_IMAGE;
    const existing = this.pools.get(key);
    if (existing) return existing;
    const pool: WarmPool<Live> = new WarmPool(
      target,
      {
        newWarm: () => this.newWarm(root, pool),
        provision: (live) => this.provision(live),
        teardown: (live) => this.teardown(live),
      },
      this.deps.log,
    );
    this.pools.set(key, pool);
    return pool;
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
    const live = this.deps.newLive(spec, 0x10000000 + randomInt(1, 0xffffff));
    live.warm = true;
    live.rootImage = root;
    live.warmPool = pool;
    return live;
  }

  /** Makes a warm sandbox's workspace image (default size) and cgroup, then starts it. */
  private async provision(live: Live): Promise<void> {
    const { spec } = live;
    live.layout.prepare(spec, live.uid);
    await this.deps.workspaces.provision(live, live.layout.image, this.deps.defaultWorkspaceBytes);
    this.deps.launcher.createCgroup(live);
    // Closed meanwhile: the driver's close() is discarding it (after waiting for this).
    if (!this.deps.isClosed()) this.deps.launcher.start(live);
  }

  /** Ends a warm sandbox that will not be used: its processes, cgroup, workspace and directory. */
  private async teardown(live: Live): Promise<void> {
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
    await this.deps.workspaces.removeSandboxDir(live.layout);
  }
}
