import pg from "pg";
import type { Logger } from "pino";
import { EVENTS_CHANNEL } from "../db/kysely-store.ts";

/**
 * Follows the append notifications of every replica on a dedicated
 * PostgreSQL connection (LISTEN needs a session of its own, outside the
 * pool) and reports the sessions other replicas wrote to. Reconnects after a
 * lost connection; followers also re-read the log on a timer, so a gap in
 * notifications delays events but never loses them.
 */
export class PgEventListener {
  #client?: pg.Client;
  #stopped = false;
  #retry?: NodeJS.Timeout;

  constructor(
    private readonly url: string,
    private readonly origin: string,
    private readonly onSession: (sessionId: string) => void,
    private readonly logger: Logger,
    private readonly retryMs = 1000,
  ) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    const lost = (err?: unknown) => {
      if (this.#client !== client) return;
      this.logger.warn({ err }, "event listener connection lost; reconnecting");
      this.#client = undefined;
      client.end().catch(() => {});
      this.#restartLater();
    };
    client.on("notification", (msg) => {
      const payload = msg.payload ?? "";
      const colon = payload.lastIndexOf(":");
      if (colon < 0 || payload.slice(0, colon) === this.origin) return;
      this.onSession(payload.slice(colon + 1));
    });
    client.on("error", lost);
    client.on("end", () => lost());
    try {
      await client.connect();
      await client.query(`listen ${EVENTS_CHANNEL}`);
    } catch (err) {
      client.end().catch(() => {});
      throw err;
    }
    if (this.#stopped) await client.end();
    else this.#client = client;
  }

  #restartLater(): void {
    if (this.#stopped) return;
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      this.start().catch((err) => {
        this.logger.warn({ err }, "event listener reconnect failed");
        this.#restartLater();
      });
    }, this.retryMs);
    this.#retry.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }
}
