import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type Insertable, type Kysely, sql } from "kysely";
import { type AuthContext, actsAsOwner } from "../auth/auth-context.ts";
import { isUuid } from "../crypto/hash.ts";
import type { AuditEventsTable, IdentityDB } from "../db/schema.ts";
import { enqueueWebhookEvent, newEventId } from "../webhooks/outbox.ts";

/** Where a request came from, as the transport saw it. */
export type RequestMeta = { requestId?: string; clientAddress?: string };

/** Who did it: a signed-in caller, or (login, sign-up, acceptance) the user it turned out to be. */
export type Actor = { userId?: string; apiKeyId?: string; orgId?: string } & RequestMeta;

// An organization's key acts as no user: its entries name the key alone.
export const actorOf = (caller: AuthContext, meta: RequestMeta): Actor => ({
  userId: caller.orgKey ? undefined : caller.userId,
  apiKeyId: caller.apiKeyId,
  orgId: caller.orgId,
  ...meta,
});

export type AuditEntry = {
  action: string;
  /** The organization the entry belongs to (whose owners read it); default the actor's. */
  orgId?: string;
  target?: { type: string; id: string };
  /** Non-secret facts only (roles, emails, names): never a token, key or password. */
  details?: Record<string, string | number | boolean | null>;
};

export type AuditEvent = {
  id: string;
  orgId: string | null;
  actorUserId: string | null;
  actorApiKeyId: string | null;
  action: string;
  targetType: string | null;
  targetId: string | null;
  requestId: string | null;
  clientAddress: string | null;
  details: Record<string, unknown>;
  createdAt: Date;
};

/** An audit_events row as an entry makes it: every column but the id and time, which the table gives. */
export type AuditRow = Required<Omit<Insertable<AuditEventsTable>, "id" | "created_at">>;

/** The audit_events row of an entry, for a statement that writes it beside what it records. */
export function auditRow(actor: Actor, entry: AuditEntry): AuditRow {
  return {
    org_id: entry.orgId ?? actor.orgId ?? null,
    actor_user_id: actor.userId ?? null,
    actor_api_key_id: actor.apiKeyId ?? null,
    action: entry.action,
    target_type: entry.target?.type ?? null,
    target_id: entry.target?.id ?? null,
    request_id: actor.requestId ?? null,
    client_address: actor.clientAddress ?? null,
    details: JSON.stringify(entry.details ?? {}),
  };
}

/** Written in the transaction of the mutation it records: both happen, or neither. */
export async function recordAudit(db: Kysely<IdentityDB>, actor: Actor, entry: AuditEntry): Promise<void> {
  await db.insertInto("audit_events").values(auditRow(actor, entry)).execute();
  const event = webhookEventOf(actor, entry);
  const orgId = entry.orgId ?? actor.orgId;
  // In the same transaction: the event is queued if and only if what it reports happened.
  if (event && orgId)
    await enqueueWebhookEvent(db, { id: newEventId(), orgId, occurredAt: new Date(), ...event }, new Date());
}

/** identity's own webhook events (webhooks/event-types.ts), from the audit entries that report them. */
function webhookEventOf(actor: Actor, entry: AuditEntry): { type: string; data: Record<string, unknown> } | undefined {
  const d = entry.details ?? {};
  if (entry.action === "api_key.created")
    return {
      type: "api_key.created",
      data: {
        api_key_id: entry.target?.id,
        name: d.name,
        env: d.env,
        key_prefix: d.key_prefix,
        scopes: typeof d.scopes === "string" ? d.scopes.split(" ") : [],
        owner: d.owner,
        created_by: actor.userId ?? null,
      },
    };
  if (entry.action === "invitation.accepted")
    return {
      type: "member.added",
      data: { user_id: actor.userId, email: d.email, role: d.role, invitation_id: entry.target?.id },
    };
  return undefined;
}

/** A refresh token used twice: the family is revoked; its owner's org hears of it. */
export async function auditReuse(db: Kysely<IdentityDB>, familyId: string, meta: RequestMeta): Promise<void> {
  const family = await db
    .selectFrom("refresh_token_families")
    .select(["user_id", "org_id"])
    .where("id", "=", familyId)
    .executeTakeFirst();
  await recordAudit(
    db,
    { ...meta, orgId: family?.org_id },
    {
      action: "auth.refresh_reused",
      target: { type: "user", id: family?.user_id ?? "" },
      details: { family_revoked: true },
    },
  );
}

/**
 * A successful password login's entry, written by the statement that starts
 * its session (Sessions.login): one round trip and one commit fewer a login.
 */
export function loginAuditRow(meta: RequestMeta, userId: string, orgId: string): AuditRow {
  return auditRow({ ...meta, userId, orgId }, { action: "auth.login", target: { type: "user", id: userId } });
}

/** A failed password login, after it is answered (a login is no transaction of its own). */
export async function auditFailedLogin(db: Kysely<IdentityDB>, meta: RequestMeta, failedEmail: string): Promise<void> {
  // The landing org of a known email, so its owners see attempts on their members.
  const known = await db
    .selectFrom("users as u")
    .leftJoin("memberships as m", "m.user_id", "u.id")
    .select(["u.id", "m.org_id"])
    .where(sql<string>`lower(u.email)`, "=", failedEmail.toLowerCase())
    .orderBy("m.created_at")
    .limit(1)
    .executeTakeFirst();
  await recordAudit(
    db,
    { ...meta, orgId: known?.org_id ?? undefined },
    {
      action: "auth.login_failed",
      target: known ? { type: "user", id: known.id } : undefined,
      details: { email: failedEmail.slice(0, 320) },
    },
  );
}

const MAX_LIMIT = 100;
const ACTION_RE = /^[a-z_]+(\.[a-z_]+)*\.?$/;

export type AuditQuery = {
  limit?: number;
  after?: string;
  action?: string;
  actorUserId?: string;
  since?: Date;
  until?: Date;
};

/** The audit log of the caller's organization, newest first; owners (and admin-scoped keys) only. */
export class AuditLog {
  constructor(private readonly db: Kysely<IdentityDB>) {}

  async list(caller: AuthContext, orgId: string, q: AuditQuery): Promise<{ items: AuditEvent[]; next: string | null }> {
    if (!isUuid(orgId)) throw PlatformError.invalidArgument("org_id must be a UUID", IdentityRestCode.invalidRequest);
    if (orgId.toLowerCase() !== caller.orgId.toLowerCase())
      throw PlatformError.notFound("organization not found", IdentityRestCode.resourceNotFound);
    if (!actsAsOwner(caller))
      throw PlatformError.permissionDenied("owner role required", IdentityRestCode.insufficientRole);
    const limit = q.limit || 20;
    if (limit < 1 || limit > MAX_LIMIT)
      throw PlatformError.invalidArgument(`limit must be 1 to ${MAX_LIMIT}`, IdentityRestCode.invalidRequest);
    let query = this.db.selectFrom("audit_events").selectAll().where("org_id", "=", orgId);
    if (q.after) {
      if (!/^[1-9]\d{0,18}$/.test(q.after))
        throw PlatformError.invalidArgument("after is not a cursor of this list", IdentityRestCode.invalidRequest);
      query = query.where("id", "<", q.after);
    }
    if (q.action) {
      if (!ACTION_RE.test(q.action) || q.action.length > 100)
        throw PlatformError.invalidArgument(
          "action must look like member.removed or member.",
          IdentityRestCode.invalidRequest,
        );
      // "member." matches every member.* action.
      query = q.action.endsWith(".")
        ? query.where("action", "like", `${q.action}%`)
        : query.where("action", "=", q.action);
    }
    if (q.actorUserId) {
      if (!isUuid(q.actorUserId))
        throw PlatformError.invalidArgument("actor_user_id must be a UUID", IdentityRestCode.invalidRequest);
      query = query.where("actor_user_id", "=", q.actorUserId);
    }
    if (q.since) query = query.where("created_at", ">=", q.since);
    if (q.until) query = query.where("created_at", "<", q.until);
    const rows = await query
      .orderBy("id", "desc")
      .limit(limit + 1)
      .execute();
    const page = rows.slice(0, limit);
    return {
      items: page.map((r) => ({
        id: String(r.id),
        orgId: r.org_id,
        actorUserId: r.actor_user_id,
        actorApiKeyId: r.actor_api_key_id,
        action: r.action,
        targetType: r.target_type,
        targetId: r.target_id,
        requestId: r.request_id,
        clientAddress: r.client_address,
        details: r.details,
        createdAt: r.created_at,
      })),
      next: rows.length > limit ? String(page[page.length - 1]!.id) : null,
    };
  }
}
