/**
 * The events an endpoint may subscribe to. identity's own are written in the
 * transaction of what they report (audit/audit-log.ts); the agents service's
 * reach identity through WebhookEventService (internal port).
 */
export const WEBHOOK_EVENT_TYPES = [
  "session.idle",
  "session.requires_action",
  "run.failed",
  "session.budget_reached",
  "sandbox.failed",
  "member.added",
  "api_key.created",
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

const KNOWN = new Set<string>(WEBHOOK_EVENT_TYPES);

export const isWebhookEventType = (t: string): t is WebhookEventType => KNOWN.has(t);

/** Event types published by other services (agents); identity's own are not accepted from outside. */
export const EXTERNAL_EVENT_TYPES: ReadonlySet<string> = new Set([
  "session.idle",
  "session.requires_action",
  "run.failed",
  "session.budget_reached",
  "sandbox.failed",
]);
