import { IdentityRestCode, isUuid, PlatformError } from "@platform/errors";
import type { Kysely } from "kysely";
import type { IdentityDB } from "../db/schema.ts";
import { EXTERNAL_EVENT_TYPES } from "./event-types.ts";
import { enqueueWebhookEvent, type WebhookEvent } from "./outbox.ts";

export const MAX_EVENTS_PER_PUBLISH = 100;
const MAX_DATA_BYTES = 64 * 1024;

const bad = (message: string, field: string) =>
  PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest, { field });

/**
 * Other services' events (WebhookEventService, internal port): checked, then
 * stored with their deliveries in one transaction. Idempotent by event id, so
 * a publisher that retries after a lost answer queues nothing twice. Events of
 * an organization that no longer exists are dropped. Returns how many were new.
 */
export async function publishWebhookEvents(
  db: Kysely<IdentityDB>,
  events: readonly WebhookEvent[],
  now: Date,
): Promise<number> {
  if (events.length > MAX_EVENTS_PER_PUBLISH) throw bad(`at most ${MAX_EVENTS_PER_PUBLISH} events per call`, "events");
  for (const e of events) {
    if (!isUuid(e.id)) throw bad("events[].id must be a UUID", "events.id");
    if (!isUuid(e.orgId)) throw bad("events[].org_id must be a UUID", "events.org_id");
    if (!EXTERNAL_EVENT_TYPES.has(e.type))
      throw bad(`events[].type ${JSON.stringify(e.type.slice(0, 100))} is not published by a service`, "events.type");
    if (Number.isNaN(e.occurredAt.getTime())) throw bad("events[].occurred_at is required", "events.occurred_at");
    if (Buffer.byteLength(JSON.stringify(e.data)) > MAX_DATA_BYTES)
      throw bad(`events[].data must be at most ${MAX_DATA_BYTES} bytes as JSON`, "events.data");
  }
  if (events.length === 0) return 0;
  return db.transaction().execute(async (trx) => {
    const orgIds = [...new Set(events.map((e) => e.orgId.toLowerCase()))];
    const known = new Set(
      (await trx.selectFrom("orgs").select("id").where("id", "in", orgIds).execute()).map((r) => r.id.toLowerCase()),
    );
    let accepted = 0;
    for (const e of events)
      if (known.has(e.orgId.toLowerCase()) && (await enqueueWebhookEvent(trx, e, now))) accepted++;
    return accepted;
  });
}
