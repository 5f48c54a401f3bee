// Apart from the worker, so the settings (and `identity --settings`) load without it.
export type DeliverySettings = {
  /** WEBHOOK_TIMEOUT: one attempt, connection to the last byte read. */
  timeoutMs: number;
  /** WEBHOOKS_ALLOW_PRIVATE_TARGETS. */
  allowPrivateTargets: boolean;
  /** WEBHOOK_RETRY_BASE: the wait after the first failed attempt, doubling with each one. */
  retryBaseMs: number;
  /** WEBHOOK_RETRY_MAX: the longest wait between two attempts. */
  retryMaxMs: number;
  /** WEBHOOK_MAX_ATTEMPTS: attempts of a delivery before it is failed for good. */
  maxAttempts: number;
  /** WEBHOOK_DISABLE_AFTER: failed attempts in a row (any delivery) after which an endpoint is disabled. */
  disableAfterFailures: number;
  /** WEBHOOK_POLL_INTERVAL: how often each replica looks for due deliveries. */
  pollIntervalMs: number;
  /** Deliveries claimed at once by one replica. */
  batch?: number;
};

export const DELIVERY_DEFAULTS: DeliverySettings = {
  timeoutMs: 10_000,
  allowPrivateTargets: false,
  retryBaseMs: 30_000,
  retryMaxMs: 4 * 3_600_000,
  maxAttempts: 12,
  disableAfterFailures: 100,
  pollIntervalMs: 1000,
};
