import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { now, since } from "./stats.ts";

/**
 * The cost of one durable commit on a service's PostgreSQL database: a
 * one-row INSERT in autocommit (the server's own synchronous_commit), timed
 * from the bench process. Agents commits each streamed text token before it
 * publishes it (a client's Last-Event-ID must always name a stored event), so
 * this is the floor of the per-token figure on that database.
 */
export class CommitFloor {
  readonly samples: number[] = [];
  private constructor(private readonly client: pg.Client) {}

  static async open(url: string): Promise<CommitFloor> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query("create table if not exists bench_commit_floor (id bigserial primary key, body text not null)");
    return new CommitFloor(client);
  }

  /** `n` commits `intervalUs` apart (start to start, as the paced model emits). */
  async round(n: number, intervalUs: number): Promise<void> {
    const body = JSON.stringify({ type: "text", content: "token" });
    for (let i = 0; i < n; i++) {
      const t0 = now();
      await this.client.query("insert into bench_commit_floor (body) values ($1)", [body]);
      const took = since(t0);
      this.samples.push(took);
      const rest = intervalUs * 1000 - took;
      if (rest > 0) await sleep(rest / 1e6);
    }
  }

  async close(): Promise<void> {
    try {
      await this.client.query("drop table if exists bench_commit_floor");
    } finally {
      await this.client.end();
    }
  }
}
