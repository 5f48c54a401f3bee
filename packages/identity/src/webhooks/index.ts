export { DELIVERY_DEFAULTS, type DeliverySettings, retryDelayMs, WebhookDeliveryWorker } from "./delivery-worker.ts";
export {
  MAX_WEBHOOKS_PER_ORG,
  type Webhook,
  type WebhookAttempt,
  type WebhookDelivery,
  WebhookEndpoints,
} from "./endpoints.ts";
export { EXTERNAL_EVENT_TYPES, isWebhookEventType, WEBHOOK_EVENT_TYPES } from "./event-types.ts";
export { enqueueWebhookEvent, type WebhookEvent } from "./outbox.ts";
export { publishWebhookEvents } from "./publish.ts";
export { hasValidSignature, newWebhookSecret, signatureHeader } from "./signing.ts";
