import pg from "pg";

export interface ChannelHandlers {
  /** Each notification's payload. */
  onPayload(payload: string): void;
  /** LISTEN is in place (after the first connect and after every reconnect). */
  onUp?(): void;
  /** The session is gone (or the listener stopped); notifications may be missed until onUp. */
  onDown?(): void;
  /** A lost session or a failed reconnect; the listener keeps retrying. */
  onError?(err: unknown): void;
}

/**
 * LISTENs on one PostgreSQL channel on a session of its own (a pooled
 * connection cannot hold a LISTEN, and a transaction pooler never delivers
 * one) and reconnects after a lost session, every `retryMs`. Callers decide
 * what a gap means: onDown and onUp frame it.
 */
export class ChannelListener {
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(
    private readonly url: string,
    private readonly channel: string,
    private readonly handlers: ChannelHandlers,
    private readonly retryMs = 1000,
  ) {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a plain channel name: ${channel}`);
  }

  /** Connects and LISTENs; rejects if the first attempt fails (later ones are retried). */
  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on("notification", (n) => this.handlers.onPayload(n.payload ?? ""));
    const lost = (err?: unknown) => {
      if (this.#client !== client) return;
      this.#client = undefined;
      this.handlers.onDown?.();
      if (err) this.handlers.onError?.(err);
      client.end().catch(() => {});
      this.#reconnectLater();
    };
    client.on("error", lost);
    client.on("end", () => lost());
    try {
      await client.connect();
      await client.query(`listen ${this.channel}`);
    } catch (err) {
      client.end().catch(() => {});
      throw err;
    }
    if (this.#stopped) {
      await client.end();
      return;
    }
    this.#client = client;
    this.handlers.onUp?.();
  }

  #reconnectLater(): void {
    if (this.#stopped) return;
    clearTimeout(this.#retry);
    this.#retry = setTimeout(() => {
      this.start().catch((err: unknown) => {
        this.handlers.onError?.(err);
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
    this.handlers.onDown?.();
    await client?.end().catch(() => {});
  }
}
