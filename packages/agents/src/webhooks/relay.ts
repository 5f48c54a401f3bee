import type { JsonObject } from "@bufbuild/protobuf";
import { PollLoop } from "@platform/db";
import { type Kysely, sql } from "kysely";
import type { Logger } from "pino";
import type { AgentsDB, WebhookRelayTable } from "../db/schema.ts";

/** What the relay hands events to: identity's WebhookEventService (adapters), a double in tests. */
export interface WebhookSink {
  publish(
    events: readonly { id: string; orgId: string; type: string; occurredAt: Date; data: JsonObject }[],
  ): Promise<number>;
}

type Row = Omit<WebhookRelayTable, "pos" | "occurred_at"> & { occurred_at: Date };

const TYPES: Record<string, string> = {
  done: "session.idle",
  requires_action: "session.requires_action",
  error: "run.failed",
  budget_reached: "session.budget_reached",
  sandbox_replaced: "sandbox.failed",
};

const parsed = (text: string): JsonObject | string => {
  try {
    const v = JSON.parse(text) as unknown;
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as JsonObject) : text;
  } catch {
    return text;
  }
};

/** The webhook event of a stored session event: what a receiver needs to fetch the rest (ids, seq). */
export function webhookEventOf(r: Row) {
  const data: JsonObject = {
    session_id: r.session_id,
    agent_id: r.agent_id,
    run_id: r.run_id,
    seq: Number(r.seq),
  };
  if (r.type === "done") Object.assign(data, { tokens_in: Number(r.tokens_in), tokens_out: Number(r.tokens_out) });
  else if (r.type === "error") data.error = r.content;
  else if (r.type === "budget_reached") data.budget = parsed(r.content);
  else if (r.type === "requires_action") data.requires_action = parsed(r.content);
  else if (r.type === "sandbox_replaced") {
    const c = parsed(r.content);
    if (typeof c === "object")
      Object.assign(data, { previous_sandbox_id: c.previousSandboxId, sandbox_id: c.sandboxId });
  }
  return { id: r.id, orgId: r.org_id, type: TYPES[r.type] ?? r.type, occurredAt: r.occurred_at, data };
}

/**
 * Hands the session events organizations' webhooks hear of (copied into
 * webhook_relay by a trigger when they are stored) to identity, then deletes
 * them. Rows are claimed for a while with FOR UPDATE SKIP LOCKED, so replicas
 * share the work without sending a row twice at once; identity accepts each
 * event id once, so a row sent again after a crash or a lost answer is
 * queued once. While identity is unreachable rows wait (nothing is lost) and
 * are tried again after `retryMs`.
 */
export class WebhookRelay {
  readonly #loop = new PollLoop(
    () => this.runOnce(),
    () => this.options.intervalMs ?? 1000,
    (err) => this.logger.warn({ err }, "webhook relay pass failed; retried on the next one"),
  );

  constructor(
    private readonly db: Kysely<AgentsDB>,
    private readonly sink: WebhookSink,
    private readonly logger: Logger,
    private readonly options: { intervalMs?: number; retryMs?: number; batch?: number } = {},
  ) {}

  start(): void {
    this.#loop.start();
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
  }

  /** One pass: claims waiting rows, publishes them, deletes what identity took. Returns the number published. */
  async runOnce(): Promise<number> {
    const now = new Date();
    const claimedUntil = new Date(now.getTime() + 30_000);
    const claimed = await sql<Row>`
      update webhook_relay set claimed_until = ${claimedUntil}
      where id in (
        select id from webhook_relay
        where claimed_until is null or claimed_until < ${now}
        order by pos
        limit ${this.options.batch ?? 100}
        for update skip locked
      )
      returning id, org_id, session_id, agent_id, run_id, seq, type, content, tokens_in, tokens_out, occurred_at, claimed_until
    `.execute(this.db);
    const rows = claimed.rows;
    if (rows.length === 0) return 0;
    const ids = rows.map((r) => r.id);
    try {
      await this.sink.publish(rows.map(webhookEventOf));
    } catch (err) {
      const retryAt = new Date(Date.now() + (this.options.retryMs ?? 5000));
      await this.db.updateTable("webhook_relay").set({ claimed_until: retryAt }).where("id", "in", ids).execute();
      this.logger.warn({ err, events: rows.length }, "identity did not take the webhook events; they wait");
      return 0;
    }
    await this.db.deleteFrom("webhook_relay").where("id", "in", ids).execute();
    return rows.length;
  }
}
