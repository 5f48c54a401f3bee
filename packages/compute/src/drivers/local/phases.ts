import type { SandboxObservation } from "../../driver.ts";
import { type Live, openFs } from "./live.ts";

/** What a phase change touches of a sandbox. */
export type Phased = Pick<
  Live,
  "spec" | "observation" | "settledWaiters" | "warm" | "slots" | "fs" | "workspaceDir" | "uid"
>;

export type PhaseListener = (sandboxId: string, observation: SandboxObservation) => void;

/**
 * The sandboxes' phases as the driver reports them: every change goes
 * through here, so the waiters for a start, the driver's listeners (the
 * domain's records) and what a phase brings along (the file calls' view, the
 * first exec's cgroup) never miss one.
 */
export class Phases {
  private readonly listeners = new Set<PhaseListener>();

  onChange(listener: PhaseListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  set(live: Phased, observation: SandboxObservation): void {
    const changed = live.observation.phase !== observation.phase;
    live.observation = observation;
    if (!live.fs && observation.phase === "ready") openFs(live);
    // The first exec's cgroup too is made before it is asked for.
    if (observation.phase === "ready" && changed) live.slots.prepare();
    if (observation.phase !== "starting") {
      const waiters = live.settledWaiters;
      live.settledWaiters = [];
      for (const w of waiters) w();
    }
    if (changed && !live.warm) this.announce(live);
  }

  /** Tells the listeners live's phase (an adopted warm sandbox is READY to them at once). */
  announce(live: Pick<Live, "spec" | "observation">): void {
    for (const l of this.listeners) l(live.spec.sandboxId, { ...live.observation });
  }

  /** live's phase once it is no longer starting. */
  waitSettled(live: Pick<Live, "observation" | "settledWaiters">, signal?: AbortSignal): Promise<SandboxObservation> {
    if (live.observation.phase !== "starting") return Promise.resolve({ ...live.observation });
    return new Promise((resolve, reject) => {
      // The sandbox's own handles are unref'd (it outlives this process), so a
      // waiter keeps the event loop alive itself until the phase settles.
      const keepAlive = setInterval(() => {}, 1000);
      const done = () => {
        clearInterval(keepAlive);
        signal?.removeEventListener("abort", onAbort);
        resolve({ ...live.observation });
      };
      const onAbort = () => {
        clearInterval(keepAlive);
        live.settledWaiters = live.settledWaiters.filter((w) => w !== done);
        reject(signal?.reason);
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      live.settledWaiters.push(done);
    });
  }
}
