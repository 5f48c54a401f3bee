import { Code, PlatformError } from "@platform/errors";
import type { EnsureReadyResult, ScaleState } from "../controller/controller.ts";

export interface Target {
  deployName: string;
  /** gRPC base URL of the tenant worker. */
  url: string;
}

export interface WakerOptions {
  controller: {
    ensureReady(tenantId: string, orgId: string): Promise<EnsureReadyResult>;
    endpoint(deployName: string): Promise<string | undefined>;
  };
  /** Resolves whether the worker at `url` became reachable (gRPC health SERVING) within `timeoutMs`. */
  waitReachable(url: string, timeoutMs: number): Promise<boolean>;
  /** Cold-start wait (spec: 10 s). */
  reachTimeoutMs?: number;
  /** Requests that may wait on one tenant's wake; past it, 503 at once. */
  maxWaitersPerTenant?: number;
  /** How long a worker that answered is trusted without asking the controller again. */
  knownForMs?: number;
  now?: () => number;
  /** A cold start ended (EnsureReady had to create or scale up the worker): for metrics. */
  onColdStart?: (coldStart: { ms: number; scaleState: ScaleState; reached: boolean }) => void;
}

interface Flight {
  promise: Promise<Target>;
  waiters: number;
  /** Whether this flight waited for reachability. */
  reaches: boolean;
}

/** A tenant worker could not be made reachable: 503 with Retry-After. */
export class TenantUnavailableError extends PlatformError {
  constructor(message: string, cause?: unknown) {
    super(Code.Unavailable, "unavailable", message, {}, { cause });
  }
}

/**
 * Finds or wakes tenant workers for the router. One wake per tenant runs at
 * a time (single flight): concurrent requests for a sleeping tenant share
 * it, up to `maxWaitersPerTenant`; the next ones fail at once.
 */
export class TenantWaker {
  readonly #o: Required<Omit<WakerOptions, "controller" | "waitReachable" | "onColdStart">> &
    Pick<WakerOptions, "controller" | "waitReachable" | "onColdStart">;
  readonly #flights = new Map<string, Flight>();
  readonly #known = new Map<string, { target: Target; until: number }>();

  constructor(options: WakerOptions) {
    this.#o = {
      controller: options.controller,
      waitReachable: options.waitReachable,
      reachTimeoutMs: options.reachTimeoutMs ?? 10_000,
      maxWaitersPerTenant: options.maxWaitersPerTenant ?? 32,
      knownForMs: options.knownForMs ?? 5_000,
      now: options.now ?? Date.now,
      onColdStart: options.onColdStart,
    };
  }

  /**
   * The tenant's worker for a first attempt: a recently good one as is, else
   * EnsureReady, and when that had to create or scale up, the cold-start wait.
   */
  target(tenantId: string, orgId: string): Promise<Target> {
    const k = this.#known.get(tenantId);
    if (k && k.until > this.#o.now()) return Promise.resolve(k.target);
    return this.#join(tenantId, orgId, false);
  }

  /** After a failed attempt: EnsureReady and wait up to 10 s for the worker to answer. */
  wake(tenantId: string, orgId: string): Promise<Target> {
    this.#known.delete(tenantId);
    return this.#join(tenantId, orgId, true);
  }

  /** The worker answered: trust it for a while. */
  good(tenantId: string, target: Target): void {
    this.#known.set(tenantId, { target, until: this.#o.now() + this.#o.knownForMs });
  }

  /** Waiting requests for the tenant (for tests and metrics). */
  waiting(tenantId: string): number {
    return this.#flights.get(tenantId)?.waiters ?? 0;
  }

  /** Requests waiting on any tenant's wake, and the wakes under way (metrics). */
  queue(): { waiting: number; wakes: number } {
    let waiting = 0;
    for (const f of this.#flights.values()) waiting += f.waiters;
    return { waiting, wakes: this.#flights.size };
  }

  async #join(tenantId: string, orgId: string, mustReach: boolean): Promise<Target> {
    let flight = this.#flights.get(tenantId);
    if (flight && flight.waiters >= this.#o.maxWaitersPerTenant) {
      throw new TenantUnavailableError("too many requests are waiting for this tenant's worker");
    }
    if (!flight) {
      const promise = this.#fly(tenantId, orgId, mustReach);
      flight = { promise, waiters: 0, reaches: mustReach };
      this.#flights.set(tenantId, flight);
      const mine = flight;
      void promise.then(
        () => this.#flights.get(tenantId) === mine && this.#flights.delete(tenantId),
        () => this.#flights.get(tenantId) === mine && this.#flights.delete(tenantId),
      );
    }
    flight.waiters++;
    try {
      const target = await flight.promise;
      if (mustReach && !flight.reaches && !(await this.#o.waitReachable(target.url, this.#o.reachTimeoutMs))) {
        throw new TenantUnavailableError("tenant worker not reachable");
      }
      return target;
    } finally {
      flight.waiters--;
    }
  }

  /**
   * EnsureReady, then the reachability wait. The wait's 10 s count from the
   * start of the wake, so an orchestrator whose scale-up itself waits for the
   * worker (the local one) does not stretch the cold start to twice as long.
   */
  async #fly(tenantId: string, orgId: string, mustReach: boolean): Promise<Target> {
    const started = this.#o.now();
    let ensured: EnsureReadyResult;
    let url: string | undefined;
    try {
      ensured = await this.#o.controller.ensureReady(tenantId, orgId);
      url = await this.#o.controller.endpoint(ensured.deployName);
    } catch (err) {
      if (err instanceof PlatformError && err.code === Code.InvalidArgument) throw err;
      throw new TenantUnavailableError("tenant worker cannot be started", err);
    }
    if (!url) throw new TenantUnavailableError("tenant worker has no endpoint");
    if (mustReach || ensured.scaleState !== "running") {
      // At least one probe, even when EnsureReady used up the budget.
      const left = Math.max(1, this.#o.reachTimeoutMs - (this.#o.now() - started));
      const reached = await this.#o.waitReachable(url, left);
      if (ensured.scaleState !== "running") {
        this.#o.onColdStart?.({ ms: this.#o.now() - started, scaleState: ensured.scaleState, reached });
      }
      if (!reached) {
        throw new TenantUnavailableError("tenant worker not reachable within the cold-start wait");
      }
    }
    return { deployName: ensured.deployName, url };
  }
}
