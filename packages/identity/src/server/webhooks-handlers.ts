import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type WebhookEventService, WebhookService } from "@platform/gen/identity/v1/webhooks_pb";
import type { AuthContext } from "../auth/auth-context.ts";
import { actorOf } from "../audit/audit-log.ts";
import type { Identity } from "../identity.ts";
import type { Webhook, WebhookDelivery } from "../webhooks/endpoints.ts";
import { authContextKey } from "./auth-interceptor.ts";
import { replayable } from "./idempotency-interceptor.ts";
import { requestMeta } from "./teams-handlers.ts";

// Translation only: the rules live in webhooks/.

const ts = (d: Date) => timestampFromDate(d);

function caller(ctx: HandlerContext): AuthContext {
  const c = ctx.values.get(authContextKey);
  if (!c) throw PlatformError.unauthenticated("missing credential", IdentityRestCode.unauthenticated);
  return c;
}

const webhook = (w: Webhook) => ({
  id: w.id,
  orgId: w.orgId,
  url: w.url,
  eventTypes: w.eventTypes,
  enabled: w.enabled,
  description: w.description,
  disabledReason: w.disabledReason ?? "",
  failureStreak: w.failureStreak,
  previousSecretExpiresAt: w.previousSecretExpiresAt ? ts(w.previousSecretExpiresAt) : undefined,
  createdAt: ts(w.createdAt),
  updatedAt: ts(w.updatedAt),
});

const delivery = (d: WebhookDelivery) => ({
  id: d.id,
  webhookId: d.webhookId,
  eventId: d.eventId,
  eventType: d.eventType,
  status: d.status,
  attemptCount: d.attemptCount,
  nextAttemptAt: d.nextAttemptAt ? ts(d.nextAttemptAt) : undefined,
  createdAt: ts(d.createdAt),
  completedAt: d.completedAt ? ts(d.completedAt) : undefined,
  attempts: d.attempts.map((a) => ({
    number: a.number,
    startedAt: ts(a.startedAt),
    statusCode: a.statusCode,
    latencyMs: a.latencyMs,
    responseExcerpt: a.responseExcerpt,
    error: a.error,
  })),
});

export function webhookService(identity: Identity): Partial<ServiceImpl<typeof WebhookService>> {
  const actor = (ctx: HandlerContext) => actorOf(caller(ctx), requestMeta(identity, ctx));
  const hooks = identity.webhooks;
  return replayable(WebhookService, {
    createWebhook: async (req, ctx) => {
      const created = await hooks.create(caller(ctx), actor(ctx), req.orgId, {
        url: req.url,
        eventTypes: req.eventTypes,
        enabled: req.enabled,
        description: req.description,
      });
      return { webhook: webhook(created.webhook), secret: created.secret };
    },
    listWebhooks: async (req, ctx) => ({ webhooks: (await hooks.list(caller(ctx), req.orgId)).map(webhook) }),
    getWebhook: async (req, ctx) => ({ webhook: webhook(await hooks.get(caller(ctx), req.orgId, req.id)) }),
    updateWebhook: async (req, ctx) => ({
      webhook: webhook(
        await hooks.update(caller(ctx), actor(ctx), req.orgId, req.id, {
          url: req.url,
          eventTypes: req.eventTypes,
          enabled: req.enabled,
          description: req.description,
        }),
      ),
    }),
    deleteWebhook: async (req, ctx) => {
      await hooks.delete(caller(ctx), actor(ctx), req.orgId, req.id);
      return {};
    },
    rotateWebhookSecret: async (req, ctx) => {
      const rotated = await hooks.rotateSecret(caller(ctx), actor(ctx), req.orgId, req.id);
      return { webhook: webhook(rotated.webhook), secret: rotated.secret };
    },
    listWebhookDeliveries: async (req, ctx) => {
      const page = await hooks.deliveries(caller(ctx), req.orgId, req.id, { limit: req.limit, after: req.after });
      return { items: page.items.map(delivery), next: page.next ?? undefined };
    },
    redeliverWebhookDelivery: async (req, ctx) => {
      const d = await hooks.redeliver(caller(ctx), actor(ctx), req.orgId, req.id, req.deliveryId);
      identity.webhookWorker.wake();
      return { delivery: delivery(d) };
    },
  });
}

/** Internal port only (servers.ts): the agents service's events. */
export function webhookEventService(identity: Identity): Partial<ServiceImpl<typeof WebhookEventService>> {
  return {
    publishWebhookEvents: async (req) => ({
      accepted: await identity.publishWebhookEvents(
        req.events.map((e) => ({
          id: e.id,
          orgId: e.orgId,
          type: e.type,
          occurredAt: e.occurredAt ? timestampDate(e.occurredAt) : new Date(Number.NaN),
          data: (e.data ?? {}) as Record<string, unknown>,
        })),
      ),
    }),
  };
}
