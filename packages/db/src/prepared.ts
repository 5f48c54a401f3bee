import { createHash } from "node:crypto";
import { CompiledQuery, type RawBuilder, sql } from "kysely";

/** Opens the text of a statement marked by `prepared()`. */
const MARK = "/* prepared */ ";

/**
 * Marks a hot statement to run as a named prepared statement on PostgreSQL:
 * each connection parses and plans it once instead of on every call. For
 * the one statement of every streamed text token (a run's log store) that
 * was 0.3-0.4 ms of ~1 ms at p50 (scratch timing, 1,000 interleaved calls).
 *
 * Only for statements whose result columns do not follow a table's
 * columns (no `*`, no `returning *`): a prepared statement whose result type
 * changes under it (a migration of another replica adding a column) fails
 * until its connection is replaced. Changes of plan are taken care of by
 * PostgreSQL itself. PGlite runs the text as it is (the comment is inert).
 */
export function prepared<T>(query: RawBuilder<T>): RawBuilder<T> {
  return sql<T>`${sql.raw(MARK)}${query}`;
}

/**
 * A statement written out with its `$n` parameters, as `prepared()` marks
 * it, for `db.executeQuery()`: nothing is built or compiled per call (a
 * `sql` template is a tree of nodes compiled to text on every execution).
 * For the one statement of every streamed text token, whose variant is
 * fixed: the tree and its compile were half of what the store call
 * allocated (~10 of ~20 KB a call, scratch count of scavenges).
 */
export function preparedQuery<R>(text: string, parameters: readonly unknown[]): CompiledQuery<R> {
  return CompiledQuery.raw(`${MARK}${text}`, parameters as unknown[]) as CompiledQuery<R>;
}

/**
 * Runs statements written out with their `$n` parameters (as preparedQuery()
 * takes them): on PostgreSQL the database's own runner (Database.run, a named
 * prepared statement straight on a pooled connection), on PGlite, which has
 * none, through kysely.
 */
export function statementRunner(database: {
  db: { executeQuery<R>(query: CompiledQuery<R>): Promise<{ rows: R[] }> };
  run?: RunPrepared;
}): RunPrepared {
  const { db, run } = database;
  if (run) return run;
  return <R>(text: string, values: readonly unknown[]) =>
    db.executeQuery(preparedQuery<R>(text, values)).then((r) => r.rows);
}

type Client = {
  query(...args: unknown[]): unknown;
  release(err?: unknown): void;
  on?(event: "error", listener: (err: unknown) => void): unknown;
};
type Pool = { connect(): Promise<Client>; end(): Promise<void> };
/** pg.Pool's callback form of connect (PreparingPool.run). */
type CallbackPool = {
  connect(callback: (err: unknown, client: Client | undefined, release: (err?: unknown) => void) => void): void;
  readonly waitingCount?: number;
};

/** A statement's rows, or its failure as `mapError` made it (PreparingPool.run). */
export type RunPrepared = <R>(text: string, values: readonly unknown[]) => Promise<R[]>;

const ignore = (): void => {};

/**
 * Runs a statement through pg's callback form, with a promise of our own
 * around it, instead of the promise pg makes when it is given no callback.
 * With pg's own promise (pg 8.23, Node 20) every row a statement returned
 * survived two scavenges and was promoted to the old space, as garbage for
 * the next full GC: reading 100k rows in 250-row pages on one client
 * promoted ~40 MB (sum of `--trace-gc-nvp` promoted) and grew the peak RSS
 * by ~500 B a row; the same reads through the callback form promoted
 * ~0.7 MB and grew it ~100 B a row, at the same speed. The session log's
 * SSE replay (curve-session-log) is such a read.
 */
function viaCallback(client: Client, config: { name?: string; text: string; values: unknown }): Promise<unknown> {
  return new Promise((resolve, reject) => {
    client.query(config, (err: unknown, result: unknown) => (err ? reject(err) : resolve(result)));
  });
}

/**
 * A pg pool whose clients run the statements `prepared()` marked under a
 * name derived from their text (so each variant of a statement has its own,
 * and the same on every connection). pg remembers per connection which names
 * it has parsed there. Statements without parameters keep pg's simple
 * protocol (several statements in one text), as before. Every statement
 * given as text goes through pg's callback form (viaCallback).
 */
export class PreparingPool {
  readonly #clients = new WeakMap<Client, Client>();
  readonly #names = new Map<string, string>();

  constructor(private readonly inner: Pool) {}

  async connect(): Promise<Client> {
    const client = await this.inner.connect();
    let wrapped = this.#clients.get(client);
    if (!wrapped) {
      wrapped = new Proxy(client, {
        get: (target, prop) => {
          const value = Reflect.get(target, prop, target);
          if (prop !== "query") return typeof value === "function" ? value.bind(target) : value;
          return (...args: unknown[]) => {
            const [text, values] = args;
            // A cursor, a config object or a caller's own callback: as it came.
            if (typeof text !== "string" || args.length > 2 || (values !== undefined && !Array.isArray(values)))
              return target.query(...args);
            const named = text.startsWith(MARK) && Array.isArray(values) && values.length > 0;
            return viaCallback(target, named ? { name: this.#nameOf(text), text, values } : { text, values });
          };
        },
      });
      this.#clients.set(client, wrapped);
    }
    return wrapped;
  }

  end(): Promise<void> {
    return this.inner.end();
  }

  /** Callers of the pool waiting for a connection (pg.Pool's waitingCount). */
  get waitingCount(): number {
    return (this.inner as unknown as CallbackPool).waitingCount ?? 0;
  }

  /**
   * Runs `text` (as preparedQuery() writes it, unmarked) as its named
   * prepared statement on a pooled connection, through pg's callback forms
   * only: the pool's connect, the query, the release, and one promise, the
   * answer's. Through kysely the same statement went through its connection
   * provider, driver and result plugins, this pool's and GuardedPool's
   * proxies and pg.Pool's promise (about 40 promises a call); for the one
   * statement of every streamed text token (agents' run log) that was
   * ~0.1 ms of a ~1 ms store on a 2-core machine. Same connections, names
   * and release as through kysely; a failure is rejected as `mapError`
   * makes it.
   */
  run<R>(text: string, values: readonly unknown[], mapError: (err: unknown) => unknown): Promise<R[]> {
    const { statement, name } = this.#statementOf(text);
    return new Promise<R[]>((resolve, reject) => {
      (this.inner as unknown as CallbackPool).connect((err, client, release) => {
        if (err || !client) return reject(mapError(err));
        // Checked out, a client has no error listener of pg.Pool's: a
        // connection lost meanwhile would be an unheard 'error' (GuardedPool
        // adds the same one to the clients it hands out).
        if (!this.#heard.has(client)) {
          this.#heard.add(client);
          client.on?.("error", ignore);
        }
        client.query({ name, text: statement, values }, (e: unknown, result: { rows: R[] }) => {
          release();
          if (e) reject(mapError(e));
          else resolve(result.rows);
        });
      });
    });
  }

  readonly #heard = new WeakSet<Client>();
  readonly #statements = new Map<string, { statement: string; name: string }>();

  /**
   * The marked text and name of a statement `run` is given, kept by its text:
   * callers pass the same constant string each time, whose hash V8 keeps with
   * it, where the marked text made anew on each call was hashed anew (its
   * whole length) to find its name.
   */
  #statementOf(text: string): { statement: string; name: string } {
    let known = this.#statements.get(text);
    if (!known) {
      const statement = `${MARK}${text}`;
      known = { statement, name: this.#nameOf(statement) };
      this.#statements.set(text, known);
    }
    return known;
  }

  #nameOf(text: string): string {
    let name = this.#names.get(text);
    if (name === undefined) {
      name = `p_${createHash("sha256").update(text).digest("hex").slice(0, 24)}`;
      this.#names.set(text, name);
    }
    return name;
  }
}
