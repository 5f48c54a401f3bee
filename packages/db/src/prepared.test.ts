import assert from "node:assert/strict";
import { test } from "node:test";
import { PreparingPool, preparedQuery } from "./prepared.ts";

type Call = unknown[];

/** A pg-like pool of one client that answers only through the callback form and records each call's arguments. */
function fakePool(answer: (config: unknown) => Error | { rows: unknown[] }) {
  const calls: Call[] = [];
  const client = {
    query(...args: unknown[]) {
      calls.push(args);
      const last = args[args.length - 1];
      if (typeof last !== "function") return "pg's own promise";
      const out = answer(args[0]);
      setImmediate(() => (out instanceof Error ? last(out) : last(null, out)));
      return undefined;
    },
    release() {},
  };
  return { calls, pool: { connect: async () => client, end: async () => {} } };
}

test("statements given as text go through pg's callback form, named when prepared(), with their result or error", async () => {
  const { calls, pool } = fakePool((config) =>
    (config as { text: string }).text.includes("fail") ? new Error("boom") : { rows: [{ a: 1 }] },
  );
  const client = (await new PreparingPool(pool).connect()) as unknown as { query(...args: unknown[]): unknown };

  const plain = client.query("select $1::int as a", [1]);
  assert.ok(plain instanceof Promise, "a promise of its own");
  assert.deepEqual(await plain, { rows: [{ a: 1 }] });
  const marked = "/* prepared */ select $1::int as a";
  assert.deepEqual(await client.query(marked, [2]), { rows: [{ a: 1 }] });
  assert.deepEqual(await client.query("select 1; select 2"), { rows: [{ a: 1 }] });
  await assert.rejects(Promise.resolve(client.query("select fail", [])), /boom/);

  assert.equal(calls.length, 4);
  for (const call of calls) {
    assert.equal(call.length, 2, "a config and a callback");
    assert.equal(typeof call[1], "function");
  }
  assert.deepEqual(calls[0]?.[0], { text: "select $1::int as a", values: [1] });
  const named = calls[1]?.[0] as { name: string; text: string; values: unknown[] };
  assert.match(named.name, /^p_[0-9a-f]{24}$/);
  assert.deepEqual({ text: named.text, values: named.values }, { text: marked, values: [2] });
  assert.deepEqual(calls[2]?.[0], { text: "select 1; select 2", values: undefined });
});

test("a cursor, a config object or a caller's callback is passed to pg as it came", async () => {
  const { calls, pool } = fakePool(() => ({ rows: [] }));
  const client = (await new PreparingPool(pool).connect()) as unknown as { query(...args: unknown[]): unknown };
  const cursor = { submit() {} };
  const cb = () => {};
  assert.equal(client.query(cursor), "pg's own promise");
  assert.equal(client.query({ text: "select 1" }), "pg's own promise");
  client.query("select 1", [], cb);
  assert.deepEqual(calls, [[cursor], [{ text: "select 1" }], ["select 1", [], cb]]);
});

test("preparedQuery: a written-out statement runs as a named prepared statement, with its parameters", async () => {
  const { calls, pool } = fakePool(() => ({ rows: [{ a: 1 }] }));
  const client = (await new PreparingPool(pool).connect()) as unknown as { query(...args: unknown[]): unknown };
  const query = preparedQuery<{ a: number }>("select $1::int as a", [3]);
  assert.deepEqual(query.parameters, [3]);
  // As kysely's PostgresDriver runs a compiled query.
  await client.query(query.sql, [...query.parameters]);
  const named = calls[0]?.[0] as { name?: string; text: string; values: unknown[] };
  assert.match(named.name ?? "", /^p_[0-9a-f]{24}$/);
  assert.deepEqual(named.values, [3]);
});
