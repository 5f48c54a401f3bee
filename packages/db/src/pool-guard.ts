import { PlatformError } from "@platform/errors";
import { mapDatabaseError } from "./errors.ts";
import type { PreparingPool } from "./prepared.ts";

type Client = {
  query(...args: unknown[]): unknown;
  release(err?: unknown): void;
  on?(event: "error", listener: (err: unknown) => void): unknown;
};
type Pool = { connect(): Promise<Client>; end(): Promise<void> };

/** How long and how many callers may wait for a pooled connection (DatabaseOptions). */
export type PoolBounds = {
  /** Callers waiting for a connection beyond which the next is refused at once. */
  maxWaiting: number;
  /** A caller still without a connection after this long is refused. */
  acquireTimeoutMs: number;
};

/**
 * At 20 connections and a few milliseconds a statement, a thousand waiters
 * drain in a fraction of a second: more is a flood that would only be
 * answered after its callers gave up. Ten seconds without a connection means
 * the database is stuck or gone, which the caller should hear (503) well
 * before its own 30 s deadline.
 */
export const POOL_BOUNDS_DEFAULTS: PoolBounds = { maxWaiting: 1000, acquireTimeoutMs: 10_000 };

const busy = (why: string) =>
  PlatformError.unavailable(`the database is busy (${why}); retry shortly`, "unavailable", { retry_after: "1" });

const timedOut = Symbol("acquire timeout");

/**
 * The pool as kysely's PostgresDialect sees it, with the waits for a
 * connection bounded (beyond `maxWaiting` or `acquireTimeoutMs`: 503
 * unavailable + retry_after at once, instead of a queue every caller of which
 * would time out anyway), and every failure to reach the database, on
 * connecting or in a statement, turned into the one UNAVAILABLE error of
 * errors.ts (mapDatabaseError): a database that is down is the caller's
 * 503, never a 500.
 */
export class GuardedPool {
  #waiting = 0;
  readonly #clients = new WeakMap<Client, Client>();

  constructor(
    private readonly inner: Pool,
    readonly bounds: PoolBounds,
  ) {}

  /** Callers waiting for a connection now. */
  get waiting(): number {
    return this.#waiting;
  }

  async connect(): Promise<Client> {
    if (this.#waiting >= this.bounds.maxWaiting) throw busy(`${this.#waiting} callers waiting for a connection`);
    this.#waiting++;
    const pending = this.inner.connect();
    let timer: NodeJS.Timeout | undefined;
    try {
      const client = await Promise.race([
        pending,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(timedOut), this.bounds.acquireTimeoutMs);
        }),
      ]);
      return this.#guard(client);
    } catch (err) {
      if (err !== timedOut) throw mapDatabaseError(err);
      // Given back the moment it arrives: its caller has been answered.
      pending.then(
        (c) => c.release(),
        () => {},
      );
      throw busy(`no connection within ${this.bounds.acquireTimeoutMs} ms`);
    } finally {
      clearTimeout(timer);
      this.#waiting--;
    }
  }

  end(): Promise<void> {
    return this.inner.end();
  }

  /**
   * PreparingPool.run under this pool's bounds: refused at once past
   * `maxWaiting` callers waiting (its own and the pool's), a failure mapped
   * as every statement's. (Its wait for a connection is bounded by pg.Pool's
   * connectionTimeoutMillis, which openDatabase sets a second past
   * `acquireTimeoutMs`: that timeout is an outage too.)
   */
  run<R>(text: string, values: readonly unknown[]): Promise<R[]> {
    const inner = this.inner as unknown as PreparingPool;
    const waiting = this.#waiting + inner.waitingCount;
    if (waiting >= this.bounds.maxWaiting) return Promise.reject(busy(`${waiting} callers waiting for a connection`));
    return inner.run<R>(text, values, mapDatabaseError);
  }

  /** The same client with its statements' connection failures mapped (one wrapper per client: kysely keys its connections on it). */
  #guard(client: Client): Client {
    let guarded = this.#clients.get(client);
    if (!guarded) {
      // pg emits a lost connection as an 'error' event when no statement is
      // running (between the statements of a transaction); unheard, that
      // event ends the process. The next statement fails with it anyway.
      client.on?.("error", () => {});
      guarded = new Proxy(client, {
        get(target, prop) {
          const value = Reflect.get(target, prop, target);
          if (prop !== "query") return typeof value === "function" ? value.bind(target) : value;
          return (...args: unknown[]) => {
            const result = target.query(...args);
            // A cursor (streamed query) is no promise; its errors come through its reads.
            return result instanceof Promise
              ? result.catch((err: unknown) => {
                  throw mapDatabaseError(err);
                })
              : result;
          };
        },
      });
      this.#clients.set(client, guarded);
    }
    return guarded;
  }
}
