import type { Database } from "@platform/db";
import { type NetworkPolicy, policyFromJson, policyToJson } from "@platform/network-policy";
import type { Insertable, Kysely, Selectable } from "kysely";
import type { Usage } from "../driver.ts";
import type { NetworkEventsTable } from "./kysely-network-event-store.ts";
import {
  type SandboxRecord,
  type SandboxState,
  type SandboxStore,
  sourcesOf,
  type TransitionExtra,
} from "./sandbox-store.ts";

interface SandboxesTable {
  id: string;
  tenant_id: string;
  session_id: string;
  image: string;
  storage_class: string;
  workspace_size: string;
  mount_path: string;
  cpu_millis: number;
  memory_bytes: number;
  max_runtime_ms: number;
  idle_timeout_ms: number;
  paused_ms: number;
  paused_at: Date | null;
  status: SandboxState;
  failure_reason: string | null;
  driver: string;
  created_at: Date;
  updated_at: Date;
  destroyed_at: Date | null;
  total_usage: Usage | null;
  network_policy: NetworkPolicy | string | null;
}

export interface ComputeDB {
  compute_sandboxes: SandboxesTable;
  compute_network_events: NetworkEventsTable;
}

type Row = Selectable<SandboxesTable>;

function fromRow(r: Row): SandboxRecord {
  return {
    id: r.id,
    tenantId: r.tenant_id,
    sessionId: r.session_id,
    image: r.image,
    storageClass: r.storage_class,
    workspaceSize: r.workspace_size,
    mountPath: r.mount_path,
    cpuMillis: Number(r.cpu_millis),
    memoryBytes: Number(r.memory_bytes),
    maxRuntimeMs: Number(r.max_runtime_ms),
    idleTimeoutMs: Number(r.idle_timeout_ms),
    pausedMs: Number(r.paused_ms),
    pausedAt: r.paused_at ? new Date(r.paused_at) : null,
    status: r.status,
    failureReason: r.failure_reason,
    driver: r.driver,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
    destroyedAt: r.destroyed_at ? new Date(r.destroyed_at) : null,
    totalUsage: typeof r.total_usage === "string" ? (JSON.parse(r.total_usage) as Usage) : r.total_usage,
    networkPolicy: policyFromJson(r.network_policy) ?? null,
  };
}

export class KyselySandboxStore implements SandboxStore {
  private readonly db: Kysely<ComputeDB>;
  constructor(database: Database<ComputeDB> | Database<unknown>) {
    this.db = database.db as Kysely<ComputeDB>;
  }

  async insert(r: SandboxRecord): Promise<void> {
    const row: Insertable<SandboxesTable> = {
      id: r.id,
      tenant_id: r.tenantId,
      session_id: r.sessionId,
      image: r.image,
      storage_class: r.storageClass,
      workspace_size: r.workspaceSize,
      mount_path: r.mountPath,
      cpu_millis: r.cpuMillis,
      memory_bytes: r.memoryBytes,
      max_runtime_ms: r.maxRuntimeMs,
      idle_timeout_ms: r.idleTimeoutMs,
      paused_ms: r.pausedMs,
      paused_at: r.pausedAt,
      status: r.status,
      failure_reason: r.failureReason,
      driver: r.driver,
      created_at: r.createdAt,
      updated_at: r.updatedAt,
      destroyed_at: r.destroyedAt,
      total_usage: r.totalUsage ? (JSON.stringify(r.totalUsage) as never) : null,
      network_policy: policyToJson(r.networkPolicy ?? undefined),
    };
    await this.db.insertInto("compute_sandboxes").values(row).execute();
  }

  async get(id: string): Promise<SandboxRecord | undefined> {
    const row = await this.db.selectFrom("compute_sandboxes").selectAll().where("id", "=", id).executeTakeFirst();
    return row ? fromRow(row) : undefined;
  }

  async transition(id: string, to: SandboxState, extra: TransitionExtra = {}): Promise<SandboxRecord | undefined> {
    const set: Record<string, unknown> = { status: to, updated_at: new Date() };
    if (extra.failureReason !== undefined) set.failure_reason = extra.failureReason;
    if (extra.totalUsage !== undefined) set.total_usage = JSON.stringify(extra.totalUsage);
    if (extra.destroyedAt !== undefined) set.destroyed_at = extra.destroyedAt;
    if (extra.pausedMs !== undefined) set.paused_ms = extra.pausedMs;
    if (extra.pausedAt !== undefined) set.paused_at = extra.pausedAt;
    // The allowed source states are in the WHERE clause, so concurrent updates cannot break the state table.
    const updated = await this.db
      .updateTable("compute_sandboxes")
      .set(set as never)
      .where("id", "=", id)
      .where("status", "in", sourcesOf(to, extra))
      .returningAll()
      .executeTakeFirst();
    return updated ? fromRow(updated) : this.get(id);
  }

  async setNetworkPolicy(id: string, policy: NetworkPolicy | null): Promise<SandboxRecord | undefined> {
    const updated = await this.db
      .updateTable("compute_sandboxes")
      .set({ network_policy: policyToJson(policy ?? undefined), updated_at: new Date() } as never)
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
    return updated ? fromRow(updated) : undefined;
  }

  async listLive(): Promise<SandboxRecord[]> {
    const rows = await this.db
      .selectFrom("compute_sandboxes")
      .selectAll()
      .where("status", "in", ["STARTING", "READY", "PAUSED"])
      .orderBy("created_at")
      .execute();
    return rows.map(fromRow);
  }
}
