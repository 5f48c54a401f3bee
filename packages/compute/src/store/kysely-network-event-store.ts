import type { Database } from "@platform/db";
import { type Kysely, sql } from "kysely";
import type { ComputeDB } from "./kysely-sandbox-store.ts";
import type { NetworkEventRecord, NetworkEventStore } from "./network-event-store.ts";

export interface NetworkEventsTable {
  sandbox_id: string;
  seq: number;
  at: Date;
  host: string;
  port: number;
  address: string;
  allowed: boolean;
  reason: string;
  protocol: string;
  egress_bytes: number;
  ingress_bytes: number;
  duration_ms: number;
}

export class KyselyNetworkEventStore implements NetworkEventStore {
  private readonly db: Kysely<ComputeDB>;
  constructor(database: Database<ComputeDB> | Database<unknown>) {
    this.db = database.db as Kysely<ComputeDB>;
  }

  async append(e: NetworkEventRecord): Promise<void> {
    await this.db
      .insertInto("compute_network_events")
      .values({
        sandbox_id: e.sandboxId,
        seq: e.seq,
        at: e.at,
        host: e.host,
        port: e.port,
        address: e.address,
        allowed: e.allowed,
        reason: e.reason,
        protocol: e.protocol,
        egress_bytes: e.egressBytes,
        ingress_bytes: e.ingressBytes,
        duration_ms: Math.round(e.durationMs),
      })
      .execute();
  }

  async list(sandboxId: string, afterSeq: number, limit: number): Promise<NetworkEventRecord[]> {
    const rows = await this.db
      .selectFrom("compute_network_events")
      .selectAll()
      .where("sandbox_id", "=", sandboxId)
      .where("seq", ">", afterSeq)
      .orderBy("seq")
      .limit(limit)
      .execute();
    return rows.map((r) => ({
      sandboxId: r.sandbox_id,
      seq: Number(r.seq),
      at: new Date(r.at),
      host: r.host,
      port: Number(r.port),
      address: r.address,
      allowed: r.allowed,
      reason: r.reason,
      protocol: r.protocol as NetworkEventRecord["protocol"],
      egressBytes: Number(r.egress_bytes),
      ingressBytes: Number(r.ingress_bytes),
      durationMs: Number(r.duration_ms),
    }));
  }

  async totals(sandboxId: string): Promise<{ lastSeq: number; egressBytes: number; ingressBytes: number }> {
    const row = await this.db
      .selectFrom("compute_network_events")
      .select([
        sql<string>`coalesce(max(seq), 0)`.as("last"),
        sql<string>`coalesce(sum(egress_bytes), 0)`.as("egress"),
        sql<string>`coalesce(sum(ingress_bytes), 0)`.as("ingress"),
      ])
      .where("sandbox_id", "=", sandboxId)
      .executeTakeFirst();
    return {
      lastSeq: Number(row?.last ?? 0),
      egressBytes: Number(row?.egress ?? 0),
      ingressBytes: Number(row?.ingress ?? 0),
    };
  }
}
