import { basename, dirname } from "node:path";
import type { Cgroup } from "./cgroups.ts";
import type { ExecHelper } from "./exec-helper.ts";
import { processStartTime } from "./sandbox-layout.ts";

/** A cgroup for one exec, and the helper's child already placed in it, if any. */
export interface ExecSlot {
  cgroup: Cgroup;
  placed?: number;
}

/** What the slots need of their sandbox: read each time, since adoption renames its cgroup. */
export interface SlotOwner {
  readonly cgroup: Cgroup;
  readonly initPid?: number;
  readonly initStartTime?: string;
  readonly uid: number;
}

/** Bounds the search for a free exec cgroup name (a sandbox never holds this many). */
const MAX_EXEC_SEQ = 1_000_000;

/**
 * The exec cgroups of one sandbox, and the spare one made ahead: off the
 * exec's critical path and off the event loop (a v1 cgroup is a directory in
 * each of six hierarchies, ~4 ms of kernel time), with a helper child already
 * in it and in the sandbox, since moving a process into a cgroup waits for an
 * RCU grace period after a quiet spell (several ms).
 */
export class ExecSlots {
  /** The next exec's slot, being made or made; tests replace it to inject a failure. */
  spare?: Promise<ExecSlot>;
  private seq = 0;

  constructor(
    private readonly owner: SlotOwner,
    private readonly helper: ExecHelper,
    /** Whether a spare is still worth making (the sandbox is ready and not stopping). */
    private readonly wanted: () => boolean,
  ) {}

  /** The spare is a cgroup made ahead (prepareCgroup) whose child is placed once the sandbox runs (prepare). */
  private unplaced = false;

  /** Makes the spare now unless there is one (the first exec's too is made before it is asked for). */
  prepare(): void {
    const ahead = this.unplaced ? this.spare : undefined;
    if (this.spare && !ahead) return;
    this.unplaced = false;
    // A cgroup made ahead gets its child now; one that failed is made again.
    const spare = ahead
      ? ahead.then(
          (slot) => this.place(slot.cgroup),
          () => this.make(),
        )
      : this.make();
    spare.catch(() => {}); // made on demand next time
    this.spare = spare;
  }

  /**
   * Makes the next exec's cgroup while the sandbox is still starting (a
   * released sandbox's resume: its mkdirs, one per v1 hierarchy, then overlap
   * bwrap's setup instead of following the init's readiness); prepare()
   * places the child in it once the sandbox runs.
   */
  prepareCgroup(): void {
    if (this.spare) return;
    const spare = this.newCgroup().then((cgroup): ExecSlot => ({ cgroup }));
    spare.catch(() => {}); // made again by prepare(), or on demand
    this.spare = spare;
    this.unplaced = true;
  }

  /**
   * cgroup, made already (it came with the spare launcher's cgroup a
   * released sandbox took, spare-cgroup.ts), is the next exec's; its child is
   * placed once the sandbox runs (prepare). One being made is kept instead.
   */
  useCgroup(cgroup: Cgroup): void {
    if (this.spare) return;
    this.spare = Promise.resolve({ cgroup });
    this.unplaced = true;
  }

  /** The spare, or (none ready: execs at once on one sandbox) a plain cgroup; a child placed now would not be ahead. */
  async take(): Promise<ExecSlot> {
    const spare = this.spare;
    this.spare = undefined;
    this.unplaced = false;
    return (await spare?.catch(() => undefined)) ?? { cgroup: await this.newCgroup() };
  }

  /**
   * The next exec's slot, made once an exec has finished rather than when it
   * starts, so a burst of execs is not slowed by preparing the following ones;
   * right after its completed event is out (ExecAftermath, when no other exec
   * is in flight), not later: its placed child needs an RCU grace period (a
   * few ms) to get in, and an exec that comes before it is in waits for it
   * (exec-helper.c, PARK_MS). Made 10 ms later, the child was not in yet for
   * 23 % of the exec round trip figure's execs (101 of 441, one every ~15 ms),
   * each then started the usual way (~3 ms more); with this and the wait that
   * figure's p99 went from 17.7-25.0 to 10.8-12.4 ms (p50 unchanged within the
   * noise).
   */
  replenish(): void {
    if (!this.spare && this.wanted()) this.prepare();
  }

  /** Waits for a spare being made (it joins the cgroup, or fails) and drops it: nothing runs here again. */
  async settle(): Promise<void> {
    await this.spare?.catch(() => {});
    this.spare = undefined;
    this.unplaced = false;
  }

  /** Waits for a spare being made without dropping it (a pause: a child frozen mid-way would hold the helper). */
  async ready(): Promise<void> {
    await this.spare?.catch(() => {});
  }

  /** Ends the spare's placed child and removes its cgroup (the service stops). */
  async discard(): Promise<void> {
    const spare = this.spare;
    this.spare = undefined;
    this.unplaced = false;
    await spare?.then(({ cgroup }) => cgroup.killAll(1000).then(() => cgroup.removeIfEmpty())).catch(() => {});
  }

  /**
   * The owner's cgroup was renamed to `renamed` (a warm sandbox adopted): the
   * spare moved with its parent. A slot still being made when the directory
   * moved fails (its mkdir under the old name); the next exec then makes one
   * on demand. Until then nobody awaits it, so it must not count as unhandled.
   */
  followRename(renamed: Cgroup): void {
    const spare = this.spare;
    if (!spare) return;
    const moved = spare.then((slot) => ({
      ...slot,
      cgroup: renamed.child(basename(dirname(slot.cgroup.procsFiles()[0] as string))),
    }));
    moved.catch(() => {});
    this.spare = moved;
  }

  private async newCgroup(): Promise<Cgroup> {
    for (;;) {
      const cgroup = this.owner.cgroup.child(`exec-${++this.seq}`);
      try {
        await cgroup.createAsync();
        return cgroup;
      } catch (err) {
        // Re-attached after a restart, the sandbox still holds the exec cgroups of the service before
        // (a command still running, a child placed ahead): their names are skipped, not reused.
        if ((err as NodeJS.ErrnoException).code !== "EEXIST" || this.seq >= MAX_EXEC_SEQ) throw err;
      }
    }
  }

  private async make(): Promise<ExecSlot> {
    return this.place(await this.newCgroup());
  }

  /** A child of the helper made ready in cgroup (and in the sandbox), when the sandbox runs. */
  private async place(cgroup: Cgroup): Promise<ExecSlot> {
    const { initPid, initStartTime, uid } = this.owner;
    if (!initPid) return { cgroup };
    const placed = await this.helper.place({
      initPid,
      initStartTime: initStartTime ?? processStartTime(initPid),
      uid,
      cgroupProcs: cgroup.procsFiles(),
    });
    return { cgroup, placed };
  }
}
