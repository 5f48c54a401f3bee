import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import { WebhookEventService } from "@platform/gen/identity/v1/webhooks_pb";

/** An event for the organization's webhook endpoints (identity's WebhookEventService). */
export interface WebhookEventOut {
  /** A UUID: identity accepts each id once, so a retried publish queues nothing twice. */
  id: string;
  orgId: string;
  /** session.idle, session.requires_action, run.failed, session.budget_reached, sandbox.failed. */
  type: string;
  occurredAt: Date;
  data: JsonObject;
}

/** identity.v1.WebhookEventService on identity's internal port (the agents certificate). */
export class WebhookPublisher {
  readonly #client: Client<typeof WebhookEventService>;

  constructor(
    transport: Transport,
    private readonly timeoutMs = 5000,
  ) {
    this.#client = createClient(WebhookEventService, transport);
  }

  /** How many identity took as new; throws (ConnectError) when identity did not answer. */
  async publish(events: readonly WebhookEventOut[]): Promise<number> {
    const res = await this.#client.publishWebhookEvents(
      {
        events: events.map((e) => ({
          id: e.id,
          orgId: e.orgId,
          type: e.type,
          occurredAt: timestampFromDate(e.occurredAt),
          data: e.data,
        })),
      },
      { timeoutMs: this.timeoutMs },
    );
    return res.accepted;
  }
}
