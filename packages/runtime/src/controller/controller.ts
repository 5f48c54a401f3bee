import { Code, PlatformError } from "@platform/errors";
import type { Logger } from "pino";
import {
  type Deployment,
  type DeploymentSpec,
  isAlreadyExists,
  isNotFound,
  isTransient,
  type Orchestrator,
  OrchestratorError,
} from "../orchestrator/orchestrator.ts";
import { Annotation, Label, MANAGED_BY, TENANT_SELECTOR } from "./labels.ts";
import { ENSURE_BACKOFF_MS, realSleep, type Sleep, withBackoff } from "./retry.ts";
import { candidateShort, deploymentName, normalizeTenantId, tenantShort } from "./tenant-name.ts";

export type ScaleState = "created" | "scaled-up" | "running";

export interface EnsureReadyResult {
  deployName: string;
  scaleState: ScaleState;
}

export interface ControllerOptions {
  orchestrator: Orchestrator;
  /** Injectable clock (tests move time instead of waiting). */
  now?: () => Date;
  /** Injectable sleep for the EnsureReady backoff. */
  sleep?: Sleep;
  logger?: Logger;
  /** Idle time after which IdleSweep scales to zero (spec: 60 minutes). */
  idleAfterMs?: number;
  /** Time at zero replicas after which WeeklySweep deletes (spec: 7 days). */
  deleteAfterMs?: number;
  backoffMs?: readonly number[];
}

export interface SweepResult {
  /** Deployments acted on (scaled to zero, or deleted). */
  acted: string[];
  /** Deployments whose operation failed; the next sweep tries again. */
  failed: string[];
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
/** A guard against a runaway suffix walk; far beyond any real collision. */
const MAX_SUFFIX = 1000;

/**
 * The runtime controller (spec "Runtime: controller operations"): one
 * Deployment + Service per tenant, scaled to zero when idle and deleted when
 * long idle. Domain code: it speaks only to the Orchestrator port.
 */
export class Controller {
  readonly #orch: Orchestrator;
  readonly #now: () => Date;
  readonly #sleep: Sleep;
  readonly #log?: Logger;
  readonly #idleAfterMs: number;
  readonly #deleteAfterMs: number;
  readonly #backoff: readonly number[];
  /** tenant id → resolved deployment name; always re-checked against the annotation. */
  readonly #names = new Map<string, string>();

  constructor(options: ControllerOptions) {
    this.#orch = options.orchestrator;
    this.#now = options.now ?? (() => new Date());
    this.#sleep = options.sleep ?? realSleep;
    this.#log = options.logger;
    this.#idleAfterMs = options.idleAfterMs ?? 60 * MINUTE;
    this.#deleteAfterMs = options.deleteAfterMs ?? 7 * DAY;
    this.#backoff = options.backoffMs ?? ENSURE_BACKOFF_MS;
  }

  /**
   * Makes the tenant's Deployment exist with at least one replica.
   * created: it did not exist; scaled-up: it was at zero; running: it already
   * had replicas (also when a concurrent caller created it first).
   */
  async ensureReady(tenantId: string, orgId: string): Promise<EnsureReadyResult> {
    const tid = normalizeTenantId(tenantId);
    if (!orgId) throw PlatformError.invalidArgument("org id is required");
    try {
      return await withBackoff(
        () => this.#ensureOnce(tid, orgId),
        this.#sleep,
        this.#backoff,
        (err, delayMs) =>
          this.#log?.warn({ tenantId: tid, delayMs, err: String(err) }, "ensure-ready: orchestrator error, retrying"),
      );
    } catch (err) {
      throw toPlatformError(err);
    }
  }

  async #ensureOnce(tid: string, orgId: string): Promise<EnsureReadyResult> {
    for (let collisions = 0; collisions < MAX_SUFFIX; collisions++) {
      const found = await this.#locate(tid);
      if (found.deployment) {
        const name = found.deployment.name;
        if (found.deployment.replicas >= 1) return { deployName: name, scaleState: "running" };
        // last-seen-at first: a worker woken with a stale stamp would be
        // scaled down again by the next IdleSweep before the router's patch.
        await this.#orch.patchAnnotations(name, {
          [Annotation.lastSeenAt]: this.#stamp(),
          [Annotation.scaledDownAt]: null,
        });
        await this.#orch.scaleDeployment(name, 1);
        return { deployName: name, scaleState: "scaled-up" };
      }
      try {
        await this.#orch.createDeployment(this.#spec(tid, orgId, found.short));
        this.#names.set(tid, deploymentName(found.short));
        return { deployName: deploymentName(found.short), scaleState: "created" };
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
        const name = deploymentName(found.short);
        const now = await this.#orch.getDeployment(name);
        if (!now) throw new OrchestratorError("transient", `${name} reported existing but is absent`, { cause: err });
        if (now.annotations[Annotation.tenantId] === tid) {
          // A concurrent EnsureReady of this tenant won the create.
          if (now.replicas < 1) await this.#orch.scaleDeployment(name, 1);
          this.#names.set(tid, name);
          return { deployName: name, scaleState: "running" };
        }
        // Another tenant with the same short id took the name just now: walk on.
      }
    }
    throw PlatformError.internal(`no free deployment name for tenant ${tid}`);
  }

  /**
   * Finds the tenant's deployment, or the name it should get. Walks
   * runtime-t-{short}, -2, -3, ... skipping deployments of other tenants;
   * the resolved short id is read back from the tenant-short annotation.
   */
  async #locate(tid: string): Promise<{ deployment?: Deployment; short: string }> {
    const cached = this.#names.get(tid);
    if (cached) {
      const d = await this.#orch.getDeployment(cached);
      if (d && d.annotations[Annotation.tenantId] === tid) return { deployment: d, short: this.#shortOf(d) };
      this.#names.delete(tid);
    }
    const base = tenantShort(tid);
    for (let n = 1; n <= MAX_SUFFIX; n++) {
      const short = candidateShort(base, n);
      const d = await this.#orch.getDeployment(deploymentName(short));
      if (d && d.annotations[Annotation.tenantId] === tid) {
        this.#names.set(tid, d.name);
        return { deployment: d, short: this.#shortOf(d) };
      }
      if (d) continue;
      // A free slot. The tenant may still sit past it, when the deployment
      // that once pushed it to a suffix has since been deleted; the label
      // selector finds it.
      const mine = (await this.#orch.listDeployments(TENANT_SELECTOR)).find(
        (x) => x.annotations[Annotation.tenantId] === tid,
      );
      if (mine) {
        this.#names.set(tid, mine.name);
        return { deployment: mine, short: this.#shortOf(mine) };
      }
      return { short };
    }
    throw PlatformError.internal(`no free deployment name for tenant ${tid}`);
  }

  #shortOf(d: Deployment): string {
    return d.annotations[Annotation.tenantShort] ?? d.name.replace(/^runtime-t-/, "");
  }

  #spec(tid: string, orgId: string, short: string): DeploymentSpec {
    return {
      name: deploymentName(short),
      replicas: 1,
      labels: { [Label.tenant]: "true", [Label.managedBy]: MANAGED_BY },
      annotations: {
        [Annotation.tenantShort]: short,
        [Annotation.tenantId]: tid,
        [Annotation.orgId]: orgId,
        [Annotation.lastSeenAt]: this.#stamp(),
      },
      serviceAnnotations: { [Annotation.tenantId]: tid },
      env: { TENANT_ID: tid, ORG_ID: orgId },
    };
  }

  /** Base URL of the deployment's worker (gRPC), or undefined when absent. */
  async endpoint(deployName: string): Promise<string | undefined> {
    try {
      return await this.#orch.endpoint(deployName);
    } catch (err) {
      throw toPlatformError(err);
    }
  }

  /** Scales to zero every running tenant deployment idle for over 60 minutes. */
  async idleSweep(): Promise<SweepResult> {
    const now = this.#now().getTime();
    return this.#sweep("idle sweep", "scale-down failed", "scaledDown", async (d) => {
      if (d.replicas < 1) return false;
      const seen = Date.parse(d.annotations[Annotation.lastSeenAt] ?? "");
      if (Number.isNaN(seen)) {
        // No usable stamp: start the idle clock now rather than guess.
        await this.#orch.patchAnnotations(d.name, { [Annotation.lastSeenAt]: this.#stamp() });
        return false;
      }
      if (now - seen <= this.#idleAfterMs) return false;
      await this.#orch.scaleDeployment(d.name, 0);
      await this.#orch.patchAnnotations(d.name, { [Annotation.scaledDownAt]: this.#stamp() });
      return true;
    });
  }

  /** Deletes tenant deployments that have been at zero replicas for 7 days or more. */
  async weeklySweep(): Promise<SweepResult> {
    const now = this.#now().getTime();
    return this.#sweep("weekly sweep", "delete failed", "deleted", async (d) => {
      if (d.replicas !== 0) return false;
      let since = Date.parse(d.annotations[Annotation.scaledDownAt] ?? "");
      if (Number.isNaN(since)) since = Date.parse(d.annotations[Annotation.lastSeenAt] ?? "");
      if (Number.isNaN(since)) {
        await this.#orch.patchAnnotations(d.name, { [Annotation.scaledDownAt]: this.#stamp() });
        return false;
      }
      if (now - since < this.#deleteAfterMs) return false;
      await this.#orch.deleteDeployment(d.name);
      this.#forget(d.name);
      return true;
    });
  }

  /**
   * One pass of a sweep over the tenant deployments: `act` on each, true
   * when it acted. One gone meanwhile is passed over; one whose operation
   * fails is listed and logged, and the next sweep tries it again.
   */
  async #sweep(
    sweep: string,
    failure: string,
    actedKey: string,
    act: (d: Deployment) => Promise<boolean>,
  ): Promise<SweepResult> {
    const result: SweepResult = { acted: [], failed: [] };
    for (const d of await this.#list()) {
      try {
        if (await act(d)) result.acted.push(d.name);
      } catch (err) {
        if (isNotFound(err)) continue;
        result.failed.push(d.name);
        this.#log?.warn({ deployName: d.name, err: String(err) }, `${sweep}: ${failure}`);
      }
    }
    if (result.acted.length) this.#log?.info({ [actedKey]: result.acted }, sweep);
    return result;
  }

  /** Hard-deletes the tenant's Deployment and Service; the next EnsureReady re-creates. */
  async suspend(tenantId: string): Promise<void> {
    const tid = normalizeTenantId(tenantId);
    try {
      await withBackoff(
        async () => {
          const found = await this.#locate(tid);
          if (found.deployment) await this.#orch.deleteDeployment(found.deployment.name);
          this.#names.delete(tid);
        },
        this.#sleep,
        this.#backoff,
      );
    } catch (err) {
      throw toPlatformError(err);
    }
  }

  /** Merge-patches last-seen-at to now; the router calls it after each forward. */
  async updateLastSeen(deployName: string): Promise<void> {
    try {
      await this.#orch.patchAnnotations(deployName, { [Annotation.lastSeenAt]: this.#stamp() });
    } catch (err) {
      throw toPlatformError(err);
    }
  }

  async #list(): Promise<Deployment[]> {
    try {
      return await this.#orch.listDeployments(TENANT_SELECTOR);
    } catch (err) {
      throw toPlatformError(err);
    }
  }

  #forget(deployName: string): void {
    for (const [tid, name] of this.#names) if (name === deployName) this.#names.delete(tid);
  }

  /** RFC 3339 (UTC, milliseconds). */
  #stamp(): string {
    return this.#now().toISOString();
  }
}

function toPlatformError(err: unknown): PlatformError {
  if (isNotFound(err)) return PlatformError.notFound((err as Error).message);
  if (isTransient(err))
    return new PlatformError(Code.Unavailable, "unavailable", "orchestrator unavailable", {}, { cause: err });
  return PlatformError.from(err);
}
