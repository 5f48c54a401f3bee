import { loadavg } from "node:os";
import argon2 from "argon2";
import pg from "pg";
import { curveRow, fmtCount, flatCurve } from "../curve.ts";
import type { Figure, Size } from "../figure.ts";
import { HttpLoadClient } from "../http-load-client.ts";
import { repeat } from "../loop.ts";
import { OWNER } from "../stack.ts";
import { now, type Summary, since, summarize } from "../stats.ts";

export const ROW_SIZES: Record<Size, number[]> = { quick: [10, 30], full: [10, 10_000, 100_000] };

/**
 * Tops `table` up to `target` rows with one INSERT … SELECT generate_series
 * (rows copied from `template`, made unique), then ANALYZE, as autovacuum
 * would after such growth; returns the table's row count (more than the
 * target when other figures of the run had already written more).
 */
async function seed(url: string, table: "agents" | "users", target: number, templateId: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const fill =
      table === "agents"
        ? `insert into agents (id, org_id, name, slug, model)
           select gen_random_uuid(), t.org_id, 'seed ' || g, 'seed-' || replace(gen_random_uuid()::text, '-', ''), t.model
           from (select org_id, model from agents where id = $1) t,
                generate_series(1, greatest(0, $2::int - (select count(*) from agents)::int)) g`
        : `insert into users (id, email, name, password_hash)
           select gen_random_uuid(), 'seed-' || gen_random_uuid() || '@bench.invalid', 'seed ' || g, t.password_hash
           from (select password_hash from users where id = $1) t,
                generate_series(1, greatest(0, $2::int - (select count(*) from users)::int)) g`;
    await client.query(fill, [templateId, target]);
    await client.query(`analyze ${table}`);
    const { rows } = await client.query<{ n: number }>(`select count(*)::int as n from ${table}`);
    return rows[0]!.n;
  } finally {
    await client.end();
  }
}

function rowsCurve(opts: {
  id: string;
  title: string;
  table: string;
  what: string;
  results: Array<{ n: number; rows: number; s: Summary; c: Summary; load: number }>;
  control: string;
  notes: string;
}) {
  const r = opts.results;
  return flatCurve({
    id: opts.id,
    title: opts.title,
    x: { label: `rows in ${opts.table}`, scale: "log" },
    y: { label: opts.what, unit: "ms" },
    series: [
      { name: "p50", points: r.map((p) => ({ x: p.rows, y: p.s.p50 })) },
      { name: "p99", points: r.map((p) => ({ x: p.rows, y: p.s.p99 })) },
      { name: `${opts.control} p50 (interleaved)`, points: r.map((p) => ({ x: p.rows, y: p.c.p50 })) },
    ],
    columns: [
      { name: "p50 ÷ control p50", values: r.map((p) => (p.s.p50 / p.c.p50).toFixed(2)) },
      { name: "samples", values: r.map((p) => String(p.s.n)) },
      { name: "load average", values: r.map((p) => p.load.toFixed(1)) },
    ],
    judged: "p50",
    notes: opts.notes,
  });
}

/** GET /v1/agents (ListAgents over REST, its first page) as the owner with 10, 10k, 100k agents in the table. */
export const agentsListVsRows: Figure = {
  id: "curve-agents-list-rows",
  title: "curve: agents list vs rows in the agents table",
  goal: "p50 at 100k rows ≤ 2× p50 at 10",
  fullTimeoutMs: 300_000,
  async run(stack, size) {
    const agents = await stack.agents();
    const url = stack.databaseUrls.agents;
    if (!url) throw new Error("needs PostgreSQL (the agents service runs on PGlite here)");
    const { access_token: token } = await stack.login();
    const auth = { authorization: `Bearer ${token}` };
    const client = new HttpLoadClient(agents.urls.url!, 1);
    const slug = `rows-${Date.now().toString(36)}`;
    const created = await client.postJson("/v1/agents", { name: slug, slug, model: "dev/echo" }, auth);
    if (created.status !== 201) throw new Error(`create agent: ${created.status} ${created.text}`);
    const template = (JSON.parse(created.text) as { id: string }).id;
    const results: Array<{ n: number; rows: number; s: Summary; c: Summary; load: number }> = [];
    let pageSize = 0;
    try {
      for (const n of ROW_SIZES[size]) {
        const rows = await seed(url, "agents", n, template);
        const list = async () => {
          const res = await client.request("GET", "/v1/agents", undefined, auth);
          if (res.status !== 200) throw new Error(`list agents: ${res.status} ${res.text.slice(0, 200)}`);
          return res.text;
        };
        for (let i = 0; i < 5; i++) await list();
        const samples: number[] = [];
        const control: number[] = [];
        await repeat(
          { n: size === "quick" ? 5 : 300, budgetMs: size === "quick" ? 2_000 : 10_000, minN: 5 },
          async () => {
            const c0 = now();
            const one = await client.request("GET", `/v1/agents/${template}`, undefined, auth);
            if (one.status !== 200) throw new Error(`get agent: ${one.status} ${one.text.slice(0, 200)}`);
            control.push(since(c0));
            const t0 = now();
            const text = await list();
            samples.push(since(t0));
            pageSize = (Object.values(JSON.parse(text) as Record<string, unknown>).find(Array.isArray) ?? []).length;
          },
        );
        results.push({ n, rows, s: summarize(samples), c: summarize(control), load: loadavg()[0]! });
      }
    } finally {
      client.close();
    }
    const curve = rowsCurve({
      id: "agents-list-vs-rows",
      title: "agents list vs rows in the agents table",
      table: "agents",
      what: "GET /v1/agents, first page",
      control: "GET /v1/agents/{id}",
      results,
      notes: `GET /v1/agents (ListAgents), its first page (${pageSize} agents, the default limit), as the bootstrap owner over one keep-alive connection, with ${ROW_SIZES[size].map(fmtCount).join(", ")} rows in the agents table, all in the owner's org (the worst case for the org's list), seeded with one INSERT … SELECT generate_series and ANALYZE.`,
    });
    return curveRow(curve, "p50", { raw: { points: results } });
  },
};

/** POST /v1/auth/login of the owner with 10, 10k, 100k rows in identity's users table. */
export const loginVsRows: Figure = {
  id: "curve-login-rows",
  title: "curve: login vs rows in the users table",
  goal: "p50 at 100k users ≤ 2× p50 at 10",
  fullTimeoutMs: 300_000,
  async run(stack, size) {
    const identity = await stack.identity();
    const url = stack.databaseUrls.identity;
    if (!url) throw new Error("needs PostgreSQL (identity runs on PGlite here)");
    const client = new HttpLoadClient(identity.urls.rest!, 1);
    const login = async () => {
      const res = await client.postJson("/v1/auth/login", OWNER);
      if (res.status !== 200) throw new Error(`login: ${res.status} ${res.text.slice(0, 200)}`);
    };
    await login();
    // The owner's row is the template: every seeded user has a real argon2id hash.
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    const owner = await db
      .query<{ id: string; password_hash: string }>(
        "select id, password_hash from users where lower(email) = lower($1)",
        [OWNER.email],
      )
      .finally(() => db.end());
    const template = owner.rows[0]?.id;
    const hash = owner.rows[0]?.password_hash;
    if (!template || !hash) throw new Error("the bootstrap owner is not in identity's users table");
    const results: Array<{ n: number; rows: number; s: Summary; c: Summary; load: number }> = [];
    try {
      for (const n of ROW_SIZES[size]) {
        const rows = await seed(url, "users", n, template);
        for (let i = 0; i < 3; i++) await login();
        const samples: number[] = [];
        const control: number[] = [];
        await repeat(
          { n: size === "quick" ? 3 : 60, budgetMs: size === "quick" ? 2_000 : 10_000, minN: 3 },
          async () => {
            const c0 = now();
            if (!(await argon2.verify(hash, OWNER.password))) throw new Error("argon2 verify failed");
            control.push(since(c0));
            const t0 = now();
            await login();
            samples.push(since(t0));
          },
        );
        results.push({ n, rows, s: summarize(samples), c: summarize(control), load: loadavg()[0]! });
      }
    } finally {
      client.close();
    }
    const curve = rowsCurve({
      id: "login-vs-rows",
      title: "login vs rows in the users table",
      table: "users",
      what: "POST /v1/auth/login",
      control: "argon2id verify in the bench process",
      results,
      notes: `POST /v1/auth/login of the bootstrap owner, one at a time over one keep-alive connection (each an argon2id verify, so the floor is the hash), with ${ROW_SIZES[size].map(fmtCount).join(", ")} rows in identity's users table, seeded with one INSERT … SELECT generate_series (copies of the owner's hash under unique emails) and ANALYZE.`,
    });
    return curveRow(curve, "p50", { raw: { points: results } });
  },
};
