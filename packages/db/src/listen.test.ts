// The LISTEN session needs a PostgreSQL server (PGlite has no wire endpoint),
// so this suite runs in the PostgreSQL pass only.
import assert from "node:assert/strict";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { ChannelListener } from "./listen.ts";
import { testServerUrl } from "./testing.ts";

const url = testServerUrl();

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await sleep(25);
  assert.ok(check(), what);
}

test("delivers payloads, reports a lost session and LISTENs again after reconnecting", {
  skip: !url && "no TEST_DATABASE_URL",
}, async () => {
  const channel = `listen_test_${process.pid}`;
  const got: string[] = [];
  const events: string[] = [];
  const listener = new ChannelListener(
    url as string,
    channel,
    {
      onPayload: (p) => got.push(p),
      onUp: () => events.push("up"),
      onDown: () => events.push("down"),
      onError: () => events.push("error"),
    },
    50,
  );
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await listener.start();
    assert.deepEqual(events, ["up"]);
    await admin.query("select pg_notify($1, 'one')", [channel]);
    await until("the first payload arrives", () => got.includes("one"));

    await admin.query(
      "select pg_terminate_backend(pid) from pg_stat_activity where query = $1 and pid <> pg_backend_pid()",
      [`listen ${channel}`],
    );
    await until("the listener is back", () => events.filter((e) => e === "up").length === 2);
    assert.ok(events.includes("down"), events.join(","));
    await admin.query("select pg_notify($1, 'two')", [channel]);
    await until("payloads arrive after the reconnect", () => got.includes("two"));
  } finally {
    await listener.stop();
    await admin.end();
  }
  assert.equal(events.at(-1), "down");
});

test("only plain channel names are accepted (the name is not a bind parameter)", () => {
  assert.throws(() => new ChannelListener("postgres://x", "a; drop table x", { onPayload() {} }));
});
