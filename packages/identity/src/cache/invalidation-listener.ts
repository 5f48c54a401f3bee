import pg from "pg";
import type { AuthCaches } from "./auth-caches.ts";

/** The channel migration 0002's triggers notify on every change of a membership, an API key or a signing key. */
export const AUTH_CHANNEL = "identity_auth";

/**
 * Keeps the caches coherent with writes made by other replicas (or by hand
 * in SQL): LISTENs on its own PostgreSQL session (a pooled connection cannot
 * hold a LISTEN) and hands each notification to the caches. The caches are
 * enabled only once LISTEN is in place and disabled as soon as the session
 * is lost, so a gap in notifications costs speed, never a stale answer.
 */
export class InvalidationListener {
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    private readonly url: string,
    private readonly caches: AuthCaches,
    private readonly onError: (err: unknown) => void = () => {},
    private readonly retryMs = 1000,
  ) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on("notification", (n) => this.caches.apply(n.payload ?? ""));
    const lost = (err?: unknown) => {
      if (this.#client !== client) return;
      this.#client = undefined;
      this.caches.disable();
      if (err) this.onError(err);
      client.end().catch(() => {});
      this.#reconnectLater();
    };
    client.on("error", lost);
    client.on("end", () => lost());
    try {
      await client.connect();
      await client.query(`listen ${AUTH_CHANNEL}`);
    } catch (err) {
      client.end().catch(() => {});
      throw err;
    }
    if (this.#stopped) {
      await client.end();
      return;
    }
    this.#client = client;
    this.caches.enable();
  }

  #reconnectLater(): void {
    if (this.#stopped) return;
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      this.start().catch((err: unknown) => {
        this.onError(err);
        this.#reconnectLater();
      });
    }, this.retryMs);
    this.#retry.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    this.caches.disable();
    await client?.end().catch(() => {});
  }
}
