import type { NetworkPolicy } from "@platform/network-policy";
import type { Usage } from "../driver.ts";

export type SandboxState = "STARTING" | "READY" | "PAUSED" | "FAILED" | "DESTROYED";

export interface SandboxRecord {
  id: string;
  tenantId: string;
  sessionId: string;
  image: string;
  storageClass: string;
  workspaceSize: string;
  mountPath: string;
  cpuMillis: number;
  memoryBytes: number;
  maxRuntimeMs: number;
  /** Pause after this long without a running exec; 0 = never (the service default already applied). */
  idleTimeoutMs: number;
  /** Time spent paused in pauses that ended (max_runtime counts running time only). */
  pausedMs: number;
  /** Set while PAUSED: since when. */
  pausedAt: Date | null;
  status: SandboxState;
  failureReason: string | null;
  driver: string;
  createdAt: Date;
  updatedAt: Date;
  destroyedAt: Date | null;
  totalUsage: Usage | null;
  /** Outbound network; null: none (default deny). */
  networkPolicy: NetworkPolicy | null;
}

/** Which moves of the state table a status update may make. */
export const ALLOWED_FROM: Record<SandboxState, SandboxState[]> = {
  STARTING: [],
  READY: ["STARTING", "PAUSED"],
  PAUSED: ["READY"],
  FAILED: ["STARTING", "READY", "PAUSED"],
  DESTROYED: ["STARTING", "READY", "PAUSED", "FAILED"],
};

/** What a status update may set beside the status. */
export interface TransitionExtra {
  failureReason?: string;
  totalUsage?: Usage;
  destroyedAt?: Date;
  pausedMs?: number;
  /** null clears it (a resume). */
  pausedAt?: Date | null;
  /** Narrows ALLOWED_FROM: move only from these states (a driver's "ready" event applies to STARTING only, never ends a pause). */
  from?: SandboxState[];
}

/** The source states a transition to `to` with `extra` may leave. */
export function sourcesOf(to: SandboxState, extra: TransitionExtra): SandboxState[] {
  return extra.from ? ALLOWED_FROM[to].filter((s) => extra.from?.includes(s)) : ALLOWED_FROM[to];
}

/** Persistence of sandbox records; the domain owns this port. */
export interface SandboxStore {
  insert(record: SandboxRecord): Promise<void>;
  get(id: string): Promise<SandboxRecord | undefined>;
  /**
   * Moves a sandbox to `to` if its current status allows it (ALLOWED_FROM);
   * returns the record after the call (unchanged when the move was not allowed).
   */
  transition(id: string, to: SandboxState, extra?: TransitionExtra): Promise<SandboxRecord | undefined>;
  /** Records in STARTING, READY or PAUSED (to re-attach after a restart). */
  listLive(): Promise<SandboxRecord[]>;
  /** Replaces the network policy; the record after, undefined for an unknown id. */
  setNetworkPolicy(id: string, policy: NetworkPolicy | null): Promise<SandboxRecord | undefined>;
}

/** In-process store for tests that do not need a database. */
export class MemorySandboxStore implements SandboxStore {
  private readonly rows = new Map<string, SandboxRecord>();
  async insert(record: SandboxRecord): Promise<void> {
    this.rows.set(record.id, { ...record });
  }
  async get(id: string): Promise<SandboxRecord | undefined> {
    const r = this.rows.get(id);
    return r ? { ...r } : undefined;
  }
  async transition(id: string, to: SandboxState, extra: TransitionExtra = {}): Promise<SandboxRecord | undefined> {
    const r = this.rows.get(id);
    if (!r) return undefined;
    if (sourcesOf(to, extra).includes(r.status)) {
      r.status = to;
      r.updatedAt = new Date();
      if (extra.failureReason !== undefined) r.failureReason = extra.failureReason;
      if (extra.totalUsage !== undefined) r.totalUsage = extra.totalUsage;
      if (extra.destroyedAt !== undefined) r.destroyedAt = extra.destroyedAt;
      if (extra.pausedMs !== undefined) r.pausedMs = extra.pausedMs;
      if (extra.pausedAt !== undefined) r.pausedAt = extra.pausedAt;
    }
    return { ...r };
  }
  async setNetworkPolicy(id: string, policy: NetworkPolicy | null): Promise<SandboxRecord | undefined> {
    const r = this.rows.get(id);
    if (!r) return undefined;
    r.networkPolicy = policy;
    r.updatedAt = new Date();
    return { ...r };
  }
  async listLive(): Promise<SandboxRecord[]> {
    return [...this.rows.values()]
      .filter((r) => r.status === "STARTING" || r.status === "READY" || r.status === "PAUSED")
      .map((r) => ({ ...r }));
  }
}
