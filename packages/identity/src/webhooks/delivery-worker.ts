import { PollLoop } from "@platform/db";
import { type Kysely, sql } from "kysely";
import { recordAudit } from "../audit/audit-log.ts";
import type { Clock } from "../auth/auth-context.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { DeliverySettings } from "./delivery-settings.ts";
import { signingSecrets } from "./endpoints.ts";
import { postWebhook, type SendResult } from "./sender.ts";
import { signatureHeader } from "./signing.ts";

export { DELIVERY_DEFAULTS, type DeliverySettings } from "./delivery-settings.ts";

/** The wait after failed attempt n (1-based): exponential, capped, with ±20% jitter so endpoints' retries spread. */
export function retryDelayMs(n: number, s: Pick<DeliverySettings, "retryBaseMs" | "retryMaxMs">, random = Math.random) {
  const exp = Math.min(s.retryMaxMs, s.retryBaseMs * 2 ** Math.min(n - 1, 40));
  return Math.round(exp * (0.8 + 0.4 * random()));
}

type Claimed = { id: string; webhook_id: string; event_id: string; event_type: string; attempt_count: number };

/**
 * Sends the outbox. Each replica claims due deliveries with FOR UPDATE SKIP
 * LOCKED and pushes their next_attempt_at past the attempt's lease in the same
 * statement, so no other replica takes them while the attempt runs; a replica
 * that dies mid-attempt leaves them to be retried when the lease ends
 * (at-least-once). The outcome is written only if the claim is still this
 * attempt's (attempt_count unchanged).
 */
export class WebhookDeliveryWorker {
  readonly #loop = new PollLoop(
    () => this.runOnce(),
    () => this.deps.settings.pollIntervalMs,
    (err) => this.deps.onError?.(err),
  );

  constructor(
    private readonly deps: {
      db: Kysely<IdentityDB>;
      kek: Buffer;
      clock: Clock;
      settings: DeliverySettings;
      onError?: (err: unknown) => void;
    },
  ) {}

  get settings(): DeliverySettings {
    return this.deps.settings;
  }

  /** Polls every pollIntervalMs until stop(); `onError` hears of failed passes (the next one retries). */
  start(onError?: (err: unknown) => void): void {
    if (onError) this.deps.onError = onError;
    this.#loop.start();
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
  }

  /** Looks for due deliveries now instead of at the next poll. */
  wake(): void {
    this.#loop.wake();
  }

  /** One pass: claims what is due and attempts it. Returns the number attempted. */
  async runOnce(): Promise<number> {
    const claimed = await this.#claim();
    await Promise.all(claimed.map((d) => this.#attempt(d).catch((err) => this.deps.onError?.(err))));
    return claimed.length;
  }

  async #claim(): Promise<Claimed[]> {
    const { db, clock, settings } = this.deps;
    const now = clock();
    const lease = new Date(now.getTime() + settings.timeoutMs + 30_000);
    const result = await sql<Claimed>`
      update webhook_deliveries d
      set attempt_count = d.attempt_count + 1, next_attempt_at = ${lease}
      where d.id in (
        select x.id from webhook_deliveries x
        join webhook_endpoints e on e.id = x.webhook_id and e.enabled
        where x.status = 'pending' and x.next_attempt_at <= ${now}
        order by x.next_attempt_at
        limit ${settings.batch ?? 20}
        for update of x skip locked
      )
      returning d.id, d.webhook_id, d.event_id, d.event_type, d.attempt_count
    `.execute(db);
    return result.rows;
  }

  async #attempt(d: Claimed): Promise<void> {
    const { db, kek, clock, settings } = this.deps;
    const endpoint = await db
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("id", "=", d.webhook_id)
      .executeTakeFirst();
    const event = await db
      .selectFrom("webhook_events")
      .select("payload")
      .where("id", "=", d.event_id)
      .executeTakeFirst();
    if (!endpoint || !event) return; // deleted meanwhile: its rows went with it
    const startedAt = clock();
    const timestamp = Math.floor(startedAt.getTime() / 1000);
    const result: SendResult = await postWebhook(
      endpoint.url,
      {
        "webhook-id": d.id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signatureHeader(signingSecrets(kek, endpoint, startedAt), d.id, timestamp, event.payload),
        "user-agent": "platform-webhooks/1",
      },
      event.payload,
      settings,
    );
    const ok = result.statusCode >= 200 && result.statusCode < 300;
    const now = clock();
    await db.transaction().execute(async (trx) => {
      const still = await trx
        .updateTable("webhook_deliveries")
        .set(
          ok
            ? { status: "succeeded", next_attempt_at: null, completed_at: now }
            : d.attempt_count >= settings.maxAttempts
              ? { status: "failed", next_attempt_at: null, completed_at: now }
              : { next_attempt_at: new Date(now.getTime() + retryDelayMs(d.attempt_count, settings)) },
        )
        .where("id", "=", d.id)
        .where("status", "=", "pending")
        .where("attempt_count", "=", d.attempt_count)
        .returning("id")
        .executeTakeFirst();
      if (!still) return; // redelivered or taken over meanwhile: that claim records its own outcome
      await trx
        .insertInto("webhook_attempts")
        .values({
          delivery_id: d.id,
          number: d.attempt_count,
          started_at: startedAt,
          status_code: result.statusCode,
          latency_ms: result.latencyMs,
          response_excerpt: result.excerpt,
          error: result.error,
        })
        .execute();
      await this.#countStreak(trx, endpoint.id, endpoint.org_id, ok);
    });
  }

  async #countStreak(trx: Kysely<IdentityDB>, webhookId: string, orgId: string, ok: boolean) {
    if (ok) {
      await trx
        .updateTable("webhook_endpoints")
        .set({ failure_streak: 0 })
        .where("id", "=", webhookId)
        .where("failure_streak", ">", 0)
        .execute();
      return;
    }
    const limit = this.deps.settings.disableAfterFailures;
    const row = await trx
      .updateTable("webhook_endpoints")
      .set((eb) => ({ failure_streak: eb("failure_streak", "+", 1) }))
      .where("id", "=", webhookId)
      .returning(["failure_streak", "enabled"])
      .executeTakeFirst();
    if (!row?.enabled || row.failure_streak < limit) return;
    const reason = `${row.failure_streak} failed attempts in a row`;
    await trx
      .updateTable("webhook_endpoints")
      .set({ enabled: false, disabled_reason: reason, updated_at: this.deps.clock() })
      .where("id", "=", webhookId)
      .execute();
    // No person did it: the entry names no actor, only the endpoint and why.
    await recordAudit(
      trx,
      { orgId },
      { action: "webhook.disabled", target: { type: "webhook", id: webhookId }, details: { reason } },
    );
  }
}
