import type { Usage } from "../driver.ts";

export type SandboxState = "STARTING" | "READY" | "FAILED" | "DESTROYED";

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
  status: SandboxState;
  failureReason: string | null;
  driver: string;
  createdAt: Date;
  updatedAt: Date;
  destroyedAt: Date | null;
  totalUsage: Usage | null;
}

/** Which moves of the state table a status update may make. */
export const ALLOWED_FROM: Record<SandboxState, SandboxState[]> = {
  STARTING: [],
  READY: ["STARTING"],
  FAILED: ["STARTING", "READY"],
  DESTROYED: ["STARTING", "READY", "FAILED"],
};

/** Persistence of sandbox records; the domain owns this port. */
export interface SandboxStore {
  insert(record: SandboxRecord): Promise<void>;
  get(id: string): Promise<SandboxRecord | undefined>;
  /**
   * Moves a sandbox to `to` if its current status allows it (ALLOWED_FROM);
   * returns the record after the call (unchanged when the move was not allowed).
   */
  transition(
    id: string,
    to: SandboxState,
    extra?: { failureReason?: string; totalUsage?: Usage; destroyedAt?: Date },
  ): Promise<SandboxRecord | undefined>;
  /** Records in STARTING or READY (to re-attach after a restart). */
  listLive(): Promise<SandboxRecord[]>;
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
  async transition(
    id: string,
    to: SandboxState,
    extra: { failureReason?: string; totalUsage?: Usage; destroyedAt?: Date } = {},
  ): Promise<SandboxRecord | undefined> {
    const r = this.rows.get(id);
    if (!r) return undefined;
    if (ALLOWED_FROM[to].includes(r.status)) {
      r.status = to;
      r.updatedAt = new Date();
      if (extra.failureReason !== undefined) r.failureReason = extra.failureReason;
      if (extra.totalUsage !== undefined) r.totalUsage = extra.totalUsage;
      if (extra.destroyedAt !== undefined) r.destroyedAt = extra.destroyedAt;
    }
    return { ...r };
  }
  async listLive(): Promise<SandboxRecord[]> {
    return [...this.rows.values()].filter((r) => r.status === "STARTING" || r.status === "READY").map((r) => ({ ...r }));
  }
}
