import { ChannelListener } from "@platform/db";
import type { Logger } from "pino";
import { EVENTS_CHANNEL } from "../db/kysely-store.ts";

/**
 * Follows the append notifications of every replica and reports the
 * sessions other replicas wrote to. Reconnects after a lost connection;
 * followers also re-read the log on a timer, so a gap in notifications
 * delays events but never loses them.
 */
export class PgEventListener {
  readonly #channel: ChannelListener;

  constructor(url: string, origin: string, onSession: (sessionId: string) => void, logger: Logger, retryMs = 1000) {
    this.#channel = new ChannelListener(
      url,
      EVENTS_CHANNEL,
      {
        onPayload(payload) {
          const colon = payload.lastIndexOf(":");
          if (colon < 0 || payload.slice(0, colon) === origin) return;
          onSession(payload.slice(colon + 1));
        },
        onError(err) {
          logger.warn({ err }, "event listener connection lost or reconnect failed; retrying");
        },
      },
      retryMs,
    );
  }

  start(): Promise<void> {
    return this.#channel.start();
  }

  stop(): Promise<void> {
    return this.#channel.stop();
  }
}
