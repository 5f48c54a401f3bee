import type { PGlite } from "@electric-sql/pglite";

type QueryResult = { rows: unknown[]; rowCount: number; command: string };
type PoolClient = { query(sql: string, params: readonly unknown[]): Promise<QueryResult>; release(): void };

/**
 * Presents one PGlite instance as the small part of pg's Pool that kysely's
 * PostgresDialect uses. PGlite has a single connection, so a client is
 * exclusive until released: a transaction is never interleaved with another
 * caller's statements.
 */
export class PGlitePool {
  #queue: Promise<void> = Promise.resolve();

  constructor(readonly pglite: PGlite) {}

  async connect(): Promise<PoolClient> {
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const previous = this.#queue;
    this.#queue = previous.then(() => held);
    await previous;
    let released = false;
    return {
      query: async (sql, params) => {
        // Without parameters pg uses the simple protocol, which allows several
        // statements (migrations); PGlite's exec is its equivalent.
        const result =
          params.length === 0
            ? ((await this.pglite.exec(sql)).at(-1) ?? { rows: [], affectedRows: 0 })
            : await this.pglite.query(sql, params as unknown[]);
        const command = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? "";
        return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length, command };
      },
      release: () => {
        if (!released) {
          released = true;
          release();
        }
      },
    };
  }

  async end(): Promise<void> {
    await this.#queue;
    await this.pglite.close();
  }
}
