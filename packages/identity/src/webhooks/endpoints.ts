import { randomUUID } from "node:crypto";
import { open, seal } from "@platform/credentials";
import { IdentityRestCode, isUuid, PlatformError } from "@platform/errors";
import type { Kysely, Selectable } from "kysely";
import { type Actor, recordAudit } from "../audit/audit-log.ts";
import type { AuthContext, Clock } from "../auth/auth-context.ts";
import type { IdentityDB, WebhookEndpointsTable } from "../db/schema.ts";
import { notFound, ownerOf } from "../members/org-access.ts";
import { isWebhookEventType, WEBHOOK_EVENT_TYPES } from "./event-types.ts";
import { newWebhookSecret } from "./signing.ts";
import { webhookUrl } from "./target-url.ts";

export type Webhook = {
  id: string;
  orgId: string;
  url: string;
  eventTypes: string[];
  enabled: boolean;
  description: string;
  disabledReason: string | null;
  failureStreak: number;
  previousSecretExpiresAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
};

export type WebhookAttempt = {
  number: number;
  startedAt: Date;
  statusCode: number;
  latencyMs: number;
  responseExcerpt: string;
  error: string;
};

export type WebhookDelivery = {
  id: string;
  webhookId: string;
  eventId: string;
  eventType: string;
  status: string;
  attemptCount: number;
  nextAttemptAt: Date | null;
  createdAt: Date;
  completedAt: Date | null;
  attempts: WebhookAttempt[];
};

export type WebhookInput = {
  url?: string;
  eventTypes?: readonly string[];
  enabled?: boolean;
  description?: string;
};

/** Endpoints per organization: deliveries fan out to each, so their number is bounded. */
export const MAX_WEBHOOKS_PER_ORG = 50;
const MAX_DESCRIPTION = 500;
const MAX_LIMIT = 100;

const field = (name: string, message: string) =>
  PlatformError.invalidArgument(message, IdentityRestCode.invalidRequest, { field: name });

/** The AAD a secret is sealed under: a sealed secret copied onto another endpoint does not open. */
export const secretAad = (webhookId: string) => `webhook:${webhookId}`;

function eventTypesOf(value: readonly string[]): string[] {
  if (value.length === 0) throw field("event_types", "event_types must name at least one event type");
  for (const t of value)
    if (!isWebhookEventType(t))
      throw field(
        "event_types",
        `event_types: ${JSON.stringify(t.slice(0, 100))} is not an event type (${WEBHOOK_EVENT_TYPES.join(", ")})`,
      );
  return [...new Set(value)];
}

function descriptionOf(value: string): string {
  if (value.length > MAX_DESCRIPTION)
    throw field("description", `description must be at most ${MAX_DESCRIPTION} characters`);
  return value;
}

const webhookOf = (r: Selectable<WebhookEndpointsTable>): Webhook => ({
  id: r.id,
  orgId: r.org_id,
  url: r.url,
  eventTypes: r.event_types,
  enabled: r.enabled,
  description: r.description,
  disabledReason: r.disabled_reason,
  failureStreak: r.failure_streak,
  previousSecretExpiresAt: r.previous_secret_expires_at,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
});

/**
 * An organization's webhook endpoints, managed by its owners (or admin-scoped
 * keys). The signing secret is returned by create and rotate only; it is
 * stored sealed under the KEK because signing needs it (a hash would not do).
 */
export class WebhookEndpoints {
  constructor(
    private readonly deps: {
      db: Kysely<IdentityDB>;
      kek: Buffer;
      clock: Clock;
      /** How long the previous secret keeps signing after a rotation. */
      rotationOverlapMs: number;
    },
  ) {}

  async create(
    caller: AuthContext,
    actor: Actor,
    orgId: string,
    input: WebhookInput,
  ): Promise<{ webhook: Webhook; secret: string }> {
    const org = ownerOf(caller, orgId);
    const url = webhookUrl(input.url ?? "");
    const eventTypes = eventTypesOf(input.eventTypes ?? []);
    const description = descriptionOf(input.description ?? "");
    const id = randomUUID();
    const secret = newWebhookSecret();
    const { db, kek } = this.deps;
    const row = await db.transaction().execute(async (trx) => {
      const count = await trx
        .selectFrom("webhook_endpoints")
        .select((eb) => eb.fn.countAll<string>().as("n"))
        .where("org_id", "=", org)
        .executeTakeFirstOrThrow();
      if (Number(count.n) >= MAX_WEBHOOKS_PER_ORG)
        throw PlatformError.failedPrecondition(`an organization has at most ${MAX_WEBHOOKS_PER_ORG} webhook endpoints`);
      const inserted = await trx
        .insertInto("webhook_endpoints")
        .values({
          id,
          org_id: org,
          url,
          event_types: eventTypes,
          enabled: input.enabled ?? true,
          description,
          secret_sealed: seal(kek, Buffer.from(secret, "utf8"), secretAad(id)),
          created_by: actor.userId ?? null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, actor, {
        action: "webhook.created",
        target: { type: "webhook", id },
        details: { url, event_types: eventTypes.join(" ") },
      });
      return inserted;
    });
    return { webhook: webhookOf(row), secret };
  }

  async list(caller: AuthContext, orgId: string): Promise<Webhook[]> {
    const rows = await this.deps.db
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("org_id", "=", ownerOf(caller, orgId))
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .execute();
    return rows.map(webhookOf);
  }

  async get(caller: AuthContext, orgId: string, id: string): Promise<Webhook> {
    return webhookOf(await this.#row(this.deps.db, ownerOf(caller, orgId), id));
  }

  async update(caller: AuthContext, actor: Actor, orgId: string, id: string, input: WebhookInput): Promise<Webhook> {
    const org = ownerOf(caller, orgId);
    const set: Partial<Record<keyof WebhookEndpointsTable, unknown>> = {};
    if (input.url !== undefined) set.url = webhookUrl(input.url);
    if (input.eventTypes !== undefined && input.eventTypes.length > 0) set.event_types = eventTypesOf(input.eventTypes);
    if (input.description !== undefined) set.description = descriptionOf(input.description);
    if (input.enabled !== undefined) {
      set.enabled = input.enabled;
      // Enabled again by a person: the streak that disabled it starts over.
      if (input.enabled) Object.assign(set, { failure_streak: 0, disabled_reason: null });
    }
    return this.deps.db.transaction().execute(async (trx) => {
      await this.#row(trx, org, id, true);
      const row = await trx
        .updateTable("webhook_endpoints")
        .set({ ...set, updated_at: this.deps.clock() } as never)
        .where("id", "=", id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, actor, {
        action: "webhook.updated",
        target: { type: "webhook", id },
        details: Object.fromEntries(
          Object.entries(set).map(([k, v]) => [k, Array.isArray(v) ? v.join(" ") : (v as string | boolean | null)]),
        ),
      });
      return webhookOf(row);
    });
  }

  async delete(caller: AuthContext, actor: Actor, orgId: string, id: string): Promise<void> {
    const org = ownerOf(caller, orgId);
    await this.deps.db.transaction().execute(async (trx) => {
      const row = await this.#row(trx, org, id, true);
      await trx.deleteFrom("webhook_endpoints").where("id", "=", id).execute();
      await recordAudit(trx, actor, {
        action: "webhook.deleted",
        target: { type: "webhook", id },
        details: { url: row.url },
      });
    });
  }

  /** A new secret; the current one keeps signing beside it for the overlap. */
  async rotateSecret(
    caller: AuthContext,
    actor: Actor,
    orgId: string,
    id: string,
  ): Promise<{ webhook: Webhook; secret: string }> {
    const org = ownerOf(caller, orgId);
    const secret = newWebhookSecret();
    const now = this.deps.clock();
    return this.deps.db.transaction().execute(async (trx) => {
      const current = await this.#row(trx, org, id, true);
      const row = await trx
        .updateTable("webhook_endpoints")
        .set({
          secret_sealed: seal(this.deps.kek, Buffer.from(secret, "utf8"), secretAad(id)),
          previous_secret_sealed: current.secret_sealed,
          previous_secret_expires_at: new Date(now.getTime() + this.deps.rotationOverlapMs),
          updated_at: now,
        })
        .where("id", "=", id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, actor, {
        action: "webhook.secret_rotated",
        target: { type: "webhook", id },
        details: { previous_valid_until: row.previous_secret_expires_at?.toISOString() ?? null },
      });
      return { webhook: webhookOf(row), secret };
    });
  }

  async deliveries(
    caller: AuthContext,
    orgId: string,
    id: string,
    q: { limit?: number; after?: string },
  ): Promise<{ items: WebhookDelivery[]; next: string | null }> {
    const org = ownerOf(caller, orgId);
    const { db } = this.deps;
    await this.#row(db, org, id);
    const limit = q.limit || 20;
    if (limit < 1 || limit > MAX_LIMIT) throw field("limit", `limit must be 1 to ${MAX_LIMIT}`);
    let query = db.selectFrom("webhook_deliveries").selectAll().where("webhook_id", "=", id);
    if (q.after) {
      const cursor = parseCursor(q.after);
      query = query.where((eb) =>
        eb.or([eb("created_at", "<", cursor.at), eb.and([eb("created_at", "=", cursor.at), eb("id", "<", cursor.id)])]),
      );
    }
    const rows = await query
      .orderBy("created_at", "desc")
      .orderBy("id", "desc")
      .limit(limit + 1)
      .execute();
    const page = rows.slice(0, limit);
    const items = await this.#withAttempts(page);
    const last = page[page.length - 1];
    return { items, next: rows.length > limit && last ? cursorOf(last.created_at, last.id) : null };
  }

  /** Queues a delivery again at once, whatever its state; the same id and body are sent. */
  async redeliver(
    caller: AuthContext,
    actor: Actor,
    orgId: string,
    id: string,
    deliveryId: string,
  ): Promise<WebhookDelivery> {
    const org = ownerOf(caller, orgId);
    if (!isUuid(deliveryId)) throw field("delivery_id", "delivery_id must be a UUID");
    return this.deps.db.transaction().execute(async (trx) => {
      await this.#row(trx, org, id);
      const row = await trx
        .updateTable("webhook_deliveries")
        .set({ status: "pending", next_attempt_at: this.deps.clock(), completed_at: null })
        .where("id", "=", deliveryId)
        .where("webhook_id", "=", id)
        .returningAll()
        .executeTakeFirst();
      if (!row) throw notFound("delivery");
      await recordAudit(trx, actor, {
        action: "webhook.redelivered",
        target: { type: "webhook", id },
        details: { delivery_id: deliveryId },
      });
      const [delivery] = await this.#withAttempts([row], trx);
      return delivery!;
    });
  }

  async #row(db: Kysely<IdentityDB>, org: string, id: string, lock = false) {
    if (!isUuid(id)) throw field("id", "id must be a UUID");
    let q = db.selectFrom("webhook_endpoints").selectAll().where("id", "=", id).where("org_id", "=", org);
    if (lock) q = q.forUpdate();
    const row = await q.executeTakeFirst();
    if (!row) throw notFound("webhook");
    return row;
  }

  async #withAttempts(
    rows: {
      id: string;
      webhook_id: string;
      event_id: string;
      event_type: string;
      status: string;
      attempt_count: number;
      next_attempt_at: Date | null;
      created_at: Date;
      completed_at: Date | null;
    }[],
    db: Kysely<IdentityDB> = this.deps.db,
  ): Promise<WebhookDelivery[]> {
    const ids = rows.map((r) => r.id);
    const attempts = ids.length
      ? await db
          .selectFrom("webhook_attempts")
          .selectAll()
          .where("delivery_id", "in", ids)
          .orderBy("id", "asc")
          .execute()
      : [];
    return rows.map((r) => ({
      id: r.id,
      webhookId: r.webhook_id,
      eventId: r.event_id,
      eventType: r.event_type,
      status: r.status,
      attemptCount: r.attempt_count,
      nextAttemptAt: r.status === "pending" ? r.next_attempt_at : null,
      createdAt: r.created_at,
      completedAt: r.completed_at,
      attempts: attempts
        .filter((a) => a.delivery_id === r.id)
        .slice(-20)
        .map((a) => ({
          number: a.number,
          startedAt: a.started_at,
          statusCode: a.status_code,
          latencyMs: a.latency_ms,
          responseExcerpt: a.response_excerpt,
          error: a.error,
        })),
    }));
  }
}

const cursorOf = (at: Date, id: string) => Buffer.from(`${at.toISOString()}|${id}`).toString("base64url");

function parseCursor(text: string): { at: Date; id: string } {
  const bad = field("after", "after is not a cursor of this list");
  const [iso, id] = Buffer.from(text, "base64url").toString("utf8").split("|");
  const at = new Date(iso ?? "");
  if (!id || !isUuid(id) || Number.isNaN(at.getTime())) throw bad;
  return { at, id };
}

/** The secrets a delivery is signed with now: the current one, and the previous during its overlap. */
export function signingSecrets(kek: Buffer, row: Selectable<WebhookEndpointsTable>, now: Date): string[] {
  const aad = secretAad(row.id);
  const secrets = [open(kek, row.secret_sealed, aad).toString("utf8")];
  if (row.previous_secret_sealed && row.previous_secret_expires_at && row.previous_secret_expires_at > now)
    secrets.push(open(kek, row.previous_secret_sealed, aad).toString("utf8"));
  return secrets;
}
