import { randomUUID } from "node:crypto";
import { type Kysely, sql } from "kysely";
import type { IdentityDB } from "../db/schema.ts";

export type WebhookEvent = {
  /** Unique per event: an event published twice is queued once. */
  id: string;
  orgId: string;
  type: string;
  occurredAt: Date;
  data: Record<string, unknown>;
};

/**
 * Stores an event and one pending delivery for each enabled endpoint of its
 * organization that wants its type, in the caller's transaction when given
 * one: the outbox. Nothing is sent here; the worker sends what is stored, so
 * a crash after this returns loses nothing. Returns false for an event id
 * already stored (nothing more is queued).
 */
export async function enqueueWebhookEvent(db: Kysely<IdentityDB>, event: WebhookEvent, now: Date): Promise<boolean> {
  // Standard Webhooks' payload shape; these bytes are signed and sent as they are on every attempt.
  const payload = JSON.stringify({ type: event.type, timestamp: event.occurredAt.toISOString(), data: event.data });
  const inserted = await db
    .insertInto("webhook_events")
    .values({ id: event.id, org_id: event.orgId, type: event.type, payload })
    .onConflict((oc) => oc.column("id").doNothing())
    .returning("id")
    .executeTakeFirst();
  if (!inserted) return false;
  await sql`
    insert into webhook_deliveries (id, webhook_id, event_id, event_type, status, next_attempt_at)
    select gen_random_uuid(), e.id, ${event.id}::uuid, ${event.type}, 'pending', ${now}
    from webhook_endpoints e
    where e.org_id = ${event.orgId}::uuid and e.enabled and ${event.type} = any (e.event_types)
  `.execute(db);
  return true;
}

/** A fresh event id for identity's own events. */
export const newEventId = (): string => randomUUID();
