import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { ScheduleService } from "@platform/gen/agents/v1/schedules_pb";
import { IdentityDouble } from "@platform/identity-client/testing";
import pino from "pino";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { gate, ScriptedModel } from "../testing/scripted-model.ts";
import { createAgentsTestDatabase } from "../testing/database.ts";

// Schedules through the real agents server (REST on the public port, gRPC on
// the internal one) on a clock the test moves: the ticker runs only when the
// test calls tick(), at the time the test set.

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;

let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const scripted = new ScriptedModel();
let now = new Date("2026-06-01T10:00:30Z");
const clock = () => new Date(now);
let config: ReturnType<typeof testAgentsConfig>;
const servers: AgentsServer[] = [];
/** The first server: its public and internal URLs. */
let base: string;
let grpcBase: string;

async function startServer(): Promise<AgentsServer & { url: string; grpcUrl: string }> {
  const providers = new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
  const service = await createAgentsServer(config, pino({ level: "silent" }), {
    providers,
    database,
    pollMs: 200,
    internalTls: undefined,
    clock,
    scheduleTickMs: 0,
  });
  const { url, grpcUrl } = await service.listen();
  servers.push(service);
  return Object.assign(service, { url, grpcUrl });
}

before(async () => {
  database = await createAgentsTestDatabase();
  config = testAgentsConfig({ identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() });
  const first = await startServer();
  base = first.url;
  grpcBase = first.grpcUrl;
});
after(async () => {
  for (const s of servers) await s.close().catch(() => {});
  await identity.stop();
  await compute.stop();
  await database?.close();
});

async function call(method: string, path: string, opts: { token?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = {};
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as Json };
}

function assertError(res: { status: number; json: Json }, status: number, code: string, field?: RegExp) {
  assert.equal(res.status, status, JSON.stringify(res.json));
  assert.equal(res.json.error.code, code);
  if (field) assert.match(res.json.error.message, field);
}

async function newAgent(model = "dev/echo") {
  const caller = identity.caller();
  const agent = await call("POST", "/v1/agents", {
    token: caller.token,
    body: { name: "A", slug: `a-${Math.random()}`, model },
  });
  assert.equal(agent.status, 201);
  return { caller, agentId: agent.json.id as string };
}

async function createSchedule(token: string, agentId: string, body: Json) {
  const res = await call("POST", `/v1/agents/${agentId}/schedules`, { token, body });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  return res.json;
}

async function firings(token: string, scheduleId: string): Promise<Json[]> {
  const res = await call("GET", `/v1/schedules/${scheduleId}/firings?limit=100`, { token });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json.items;
}

/** The session's log once `runs` runs ended. */
async function finishedLog(token: string, sessionId: string, runs = 1): Promise<Json[]> {
  for (let i = 0; i < 200; i++) {
    const res = await call("GET", `/v1/sessions/${sessionId}`, { token });
    const events: Json[] = res.json.events;
    if (
      res.json.session.status === "idle" &&
      events.filter((e) => e.type === "done" || e.type === "error").length >= runs &&
      ["done", "error"].includes(events.at(-1)?.type)
    )
      return events;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`session ${sessionId} did not finish`);
}

describe("firing", () => {
  test("a due slot creates a session and runs the message; next runs move on", async () => {
    now = new Date("2026-06-01T10:00:30Z");
    const { caller, agentId } = await newAgent();
    const s = await createSchedule(caller.token, agentId, { cron: "*/5 * * * *", message: "good morning" });
    assert.equal(s.target, "new_session");
    assert.equal(s.catchUp, "skip");
    assert.equal(s.timeZone, "UTC");
    assert.equal(s.enabled, true);
    assert.equal(s.createdBy, caller.userId);
    assert.deepEqual(s.nextRuns, [
      "2026-06-01T10:05:00Z",
      "2026-06-01T10:10:00Z",
      "2026-06-01T10:15:00Z",
      "2026-06-01T10:20:00Z",
      "2026-06-01T10:25:00Z",
    ]);
    // Not due yet: nothing fires.
    assert.equal((await servers[0].app.scheduler.tick()).length, 0);
    assert.deepEqual(await firings(caller.token, s.id), []);

    now = new Date("2026-06-01T10:05:01Z");
    const taken = await servers[0].app.scheduler.tick();
    assert.equal(taken.filter((t) => t.schedule.id === s.id).length, 1);
    const [firing] = await firings(caller.token, s.id);
    assert.equal(firing.status, "started", JSON.stringify(firing));
    assert.equal(firing.slotTime, "2026-06-01T10:05:00Z");
    assert.ok(firing.runId);
    const events = await finishedLog(caller.token, firing.sessionId);
    assert.deepEqual(
      events.map((e) => [e.type, e.content]),
      [
        ["user", "good morning"],
        ["text", "echo: good morning"],
        ["done", ""],
      ],
    );
    const session = await call("GET", `/v1/sessions/${firing.sessionId}`, { token: caller.token });
    assert.equal(session.json.session.agentId, agentId);
    // The same slot never fires again; the next is 10:10.
    assert.equal((await servers[0].app.scheduler.tick()).length, 0);
    const got = await call("GET", `/v1/schedules/${s.id}?nextRuns=2`, { token: caller.token });
    assert.deepEqual(got.json.nextRuns, ["2026-06-01T10:10:00Z", "2026-06-01T10:15:00Z"]);
  });

  test("target session: each firing continues the one session; a firing during a run is queued behind it", async () => {
    now = new Date("2026-06-02T00:00:00Z");
    const { caller, agentId } = await newAgent("scripted/x");
    const session = await call("POST", "/v1/sessions", { token: caller.token, body: { agentId } });
    const sessionId = session.json.id as string;
    const s = await createSchedule(caller.token, agentId, {
      cron: "0 * * * *",
      message: "tick",
      target: "session",
      sessionId,
    });
    assert.equal(s.sessionId, sessionId);

    scripted.push([{ type: "text", text: "first" }]);
    now = new Date("2026-06-02T01:00:00Z");
    await servers[0].app.scheduler.tick();
    await finishedLog(caller.token, sessionId);

    // The second firing's run is held open; the third finds it still going.
    const hold = gate();
    scripted.push([
      { type: "text", text: "second" },
      { type: "wait", until: hold.promise },
    ]);
    now = new Date("2026-06-02T02:00:10Z");
    await servers[0].app.scheduler.tick();
    now = new Date("2026-06-02T03:00:10Z");
    await servers[0].app.scheduler.tick();
    const list = await firings(caller.token, s.id);
    assert.deepEqual(
      list.map((f) => [f.slotTime, f.status, f.sessionId]),
      [
        ["2026-06-02T03:00:00Z", "queued", sessionId],
        ["2026-06-02T02:00:00Z", "started", sessionId],
        ["2026-06-02T01:00:00Z", "started", sessionId],
      ],
    );
    assert.match(list[0].reason, /^message_queued seq \d+$/);
    scripted.push([{ type: "text", text: "third" }]);
    hold.open();
    // The queued message runs once the held run ended.
    const events = await finishedLog(caller.token, sessionId, 3);
    assert.deepEqual(
      events.filter((e) => e.type === "user").map((e) => e.content),
      ["tick", "tick", "tick"],
    );
    assert.deepEqual(
      events.filter((e) => e.type === "text").map((e) => e.content),
      ["first", "second", "third"],
    );
  });
});

describe("exactly once", () => {
  test("two servers on one database fire each slot of each schedule once", async () => {
    now = new Date("2026-06-03T00:00:30Z");
    const second = await startServer();
    const { caller, agentId } = await newAgent();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push((await createSchedule(caller.token, agentId, { cron: "* * * * *", message: `m${i}` })).id);
    let taken = 0;
    const started = Date.now();
    for (let minute = 1; minute <= 3; minute++) {
      now = new Date(Date.parse("2026-06-03T00:00:05Z") + minute * 60_000);
      const rounds = await Promise.all([
        servers[0].app.scheduler.tick(),
        second.app.scheduler.tick(),
        second.app.scheduler.tick(),
        servers[0].app.scheduler.tick(),
      ]);
      // Other tests' schedules are due too (as missed slots): count these six's.
      taken += rounds.flat().filter((t) => ids.includes(t.schedule.id)).length;
    }
    console.log(`# 2 replicas, 6 schedules x 3 slots: ${taken} firings taken in ${Date.now() - started} ms`);
    assert.equal(taken, 18);
    for (const id of ids) {
      const list = await firings(caller.token, id);
      assert.deepEqual(
        list.map((f) => f.slotTime),
        ["2026-06-03T00:03:00Z", "2026-06-03T00:02:00Z", "2026-06-03T00:01:00Z"],
      );
      for (const f of list) {
        assert.equal(f.status, "started", JSON.stringify(f));
        await finishedLog(caller.token, f.sessionId);
      }
    }
    await second.close();
    servers.splice(servers.indexOf(second), 1);
  });

  test("after a restart, missed slots: skip runs none, catch-up one runs the latest once", async () => {
    now = new Date("2026-06-04T08:00:30Z");
    const { caller, agentId } = await newAgent();
    const skip = await createSchedule(caller.token, agentId, { cron: "*/10 * * * *", message: "skip me" });
    const one = await createSchedule(caller.token, agentId, {
      cron: "*/10 * * * *",
      message: "catch up",
      catchUp: "one",
    });
    // The server is down from 08:00:30 to 09:25 (slots 08:10 ... 09:20 missed).
    const stopped = servers.shift()!;
    await stopped.close();
    now = new Date("2026-06-04T09:25:00Z");
    const restarted = await startServer();
    base = restarted.url;
    grpcBase = restarted.grpcUrl;
    await restarted.app.scheduler.tick();
    const skipped = await firings(caller.token, skip.id);
    assert.deepEqual(
      skipped.map((f) => [f.slotTime, f.status, f.reason, f.sessionId]),
      [["2026-06-04T09:20:00Z", "skipped", "missed", ""]],
    );
    const caught = await firings(caller.token, one.id);
    assert.deepEqual(
      caught.map((f) => [f.slotTime, f.status]),
      [["2026-06-04T09:20:00Z", "started"]],
    );
    await finishedLog(caller.token, caught[0].sessionId);
    // Both go on at the next slot; nothing of the missed ones is left to fire.
    assert.equal((await restarted.app.scheduler.tick()).length, 0);
    for (const s of [skip, one]) {
      const got = await call("GET", `/v1/schedules/${s.id}?nextRuns=1`, { token: caller.token });
      assert.deepEqual(got.json.nextRuns, ["2026-06-04T09:30:00Z"]);
    }
  });
});

describe("lost claims", () => {
  test("a firing left claimed by a replica that stopped before sending becomes failed (interrupted), never sent twice", async () => {
    now = new Date("2026-06-08T00:00:00Z");
    const { caller, agentId } = await newAgent();
    const s = await createSchedule(caller.token, agentId, { cron: "0 * * * *", message: "lost" });
    // The claim as a replica commits it, without the send that follows (its process died).
    await database.db
      .insertInto("schedule_firings")
      .values({
        id: crypto.randomUUID(),
        schedule_id: s.id,
        slot_time: new Date("2026-06-08T01:00:00Z"),
        fired_at: new Date("2026-06-08T01:00:00Z"),
        status: "claimed",
        session_id: null,
        run_id: null,
      })
      .execute();
    await database.db
      .updateTable("agent_schedules")
      .set({ next_run_at: new Date("2026-06-08T02:00:00Z") })
      .where("id", "=", s.id)
      .execute();
    now = new Date("2026-06-08T01:05:00Z");
    await servers[0].app.scheduler.tick();
    assert.equal((await firings(caller.token, s.id))[0].status, "claimed", "5 minutes: still taken");
    now = new Date("2026-06-08T01:10:01Z");
    await servers[0].app.scheduler.tick();
    const [lost] = await firings(caller.token, s.id);
    assert.equal(lost.status, "failed");
    assert.match(lost.reason, /^interrupted/);
    assert.equal(lost.sessionId, "");
  });
});

describe("management", () => {
  test("pause and resume: slots while paused never fire", async () => {
    now = new Date("2026-06-05T12:00:30Z");
    const { caller, agentId } = await newAgent();
    const s = await createSchedule(caller.token, agentId, { cron: "*/15 * * * *", message: "hi", catchUp: "one" });
    const paused = await call("PATCH", `/v1/schedules/${s.id}`, { token: caller.token, body: { enabled: false } });
    assert.equal(paused.status, 200);
    assert.equal(paused.json.enabled, false);
    assert.deepEqual(paused.json.nextRuns, []);
    now = new Date("2026-06-05T12:31:00Z");
    await servers[0].app.scheduler.tick();
    assert.deepEqual(await firings(caller.token, s.id), []);
    const resumed = await call("PATCH", `/v1/schedules/${s.id}`, { token: caller.token, body: { enabled: true } });
    assert.equal(resumed.json.enabled, true);
    assert.equal(resumed.json.nextRuns[0], "2026-06-05T12:45:00Z");
    await servers[0].app.scheduler.tick();
    assert.deepEqual(await firings(caller.token, s.id), []);
    now = new Date("2026-06-05T12:45:02Z");
    await servers[0].app.scheduler.tick();
    const list = await firings(caller.token, s.id);
    assert.deepEqual(
      list.map((f) => [f.slotTime, f.status]),
      [["2026-06-05T12:45:00Z", "started"]],
    );
    await finishedLog(caller.token, list[0].sessionId);
    // A deleted target: the firing fails and the schedule pauses itself.
    const { caller: owner2, agentId: agent2 } = await newAgent();
    const session2 = (await call("POST", "/v1/sessions", { token: owner2.token, body: { agentId: agent2 } })).json.id;
    const orphan = await createSchedule(owner2.token, agent2, {
      cron: "*/15 * * * *",
      message: "x",
      target: "session",
      sessionId: session2,
    });
    assert.equal((await call("DELETE", `/v1/sessions/${session2}`, { token: owner2.token })).status, 204);
    now = new Date("2026-06-05T13:00:01Z");
    await servers[0].app.scheduler.tick();
    assert.deepEqual(
      (await firings(owner2.token, orphan.id)).map((f) => [f.status, f.reason]),
      [["failed", "session_not_found"]],
    );
    const orphaned = await call("GET", `/v1/schedules/${orphan.id}`, { token: owner2.token });
    assert.equal(orphaned.json.enabled, false);
    assert.deepEqual(orphaned.json.nextRuns, []);

    const deleted = await call("DELETE", `/v1/schedules/${s.id}`, { token: caller.token });
    assert.equal(deleted.status, 204);
    assertError(await call("GET", `/v1/schedules/${s.id}`, { token: caller.token }), 404, "not_found");
  });

  test("time zone: next runs follow Europe/Berlin's clock across both DST changes", async () => {
    now = new Date("2026-03-27T12:00:00Z");
    const { caller, agentId } = await newAgent();
    const s = await createSchedule(caller.token, agentId, {
      cron: "0 9 * * *",
      timeZone: "Europe/Berlin",
      message: "Guten Morgen",
    });
    // 09:00 CET is 08:00Z; from 29 March 09:00 CEST is 07:00Z.
    assert.deepEqual(s.nextRuns.slice(0, 3), ["2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z"]);
    now = new Date("2026-10-23T12:00:00Z");
    const autumn = await call("GET", `/v1/schedules/${s.id}?nextRuns=3`, { token: caller.token });
    // Ahead of its first (March) slot; the stored one is still next.
    assert.equal(autumn.json.nextRuns[0], "2026-03-28T08:00:00Z");
    const moved = await call("PATCH", `/v1/schedules/${s.id}`, {
      token: caller.token,
      body: { cron: "30 2 * * *", timeZone: "Europe/Berlin" },
    });
    // 02:30 exists twice on 25 October (CEST 00:30Z, CET 01:30Z): it runs once.
    assert.deepEqual(moved.json.nextRuns.slice(0, 3), [
      "2026-10-24T00:30:00Z",
      "2026-10-25T00:30:00Z",
      "2026-10-26T01:30:00Z",
    ]);
    const utc = await call("PATCH", `/v1/schedules/${s.id}`, { token: caller.token, body: { timeZone: "UTC" } });
    assert.equal(utc.json.nextRuns[0], "2026-10-24T02:30:00Z");
  });

  test("bad input is 400 invalid_argument naming the field", async () => {
    now = new Date("2026-06-06T00:00:00Z");
    const { caller, agentId } = await newAgent();
    const post = (body: Json) => call("POST", `/v1/agents/${agentId}/schedules`, { token: caller.token, body });
    const ok = { cron: "0 * * * *", message: "m" };
    assertError(await post({ ...ok, cron: "not a cron" }), 400, "invalid_argument", /^cron /);
    assertError(await post({ ...ok, cron: "61 * * * *" }), 400, "invalid_argument", /^cron /);
    assertError(await post({ ...ok, cron: "" }), 400, "invalid_argument", /^cron is required/);
    assertError(await post({ ...ok, cron: "*/10 * * * * *" }), 400, "invalid_argument", /^cron fires more often/);
    assertError(await post({ ...ok, cron: "0 0 30 2 *" }), 400, "invalid_argument", /^cron never fires/);
    assertError(await post({ ...ok, timeZone: "Mars/Olympus" }), 400, "invalid_argument", /^timeZone /);
    assertError(await post({ ...ok, timeZone: "x".repeat(100) }), 400, "invalid_argument", /^timeZone /);
    assertError(await post({ ...ok, message: " " }), 400, "invalid_argument", /^message /);
    assertError(await post({ ...ok, message: "x".repeat(512 * 1024 + 1) }), 400, "invalid_argument", /^message /);
    assertError(await post({ ...ok, target: "everyone" }), 400, "invalid_argument", /^target /);
    assertError(await post({ ...ok, target: "session" }), 400, "invalid_argument", /^sessionId /);
    assertError(await post({ ...ok, sessionId: crypto.randomUUID() }), 400, "invalid_argument", /^sessionId /);
    assertError(await post({ ...ok, catchUp: "all" }), 400, "invalid_argument", /^catchUp /);
    assertError(
      await call("POST", "/v1/agents/not-a-uuid/schedules", { token: caller.token, body: ok }),
      400,
      "invalid_argument",
      /^agentId /,
    );
    const s = await createSchedule(caller.token, agentId, ok);
    const patch = (body: Json) => call("PATCH", `/v1/schedules/${s.id}`, { token: caller.token, body });
    assertError(await patch({ cron: "* * *" }), 400, "invalid_argument", /^cron /);
    assertError(await patch({ timeZone: "Nowhere/City" }), 400, "invalid_argument", /^timeZone /);
    assertError(
      await call("GET", `/v1/schedules/${s.id}?nextRuns=51`, { token: caller.token }),
      400,
      "invalid_argument",
      /^nextRuns /,
    );
    // Nothing of the refused changes was stored.
    const got = await call("GET", `/v1/schedules/${s.id}`, { token: caller.token });
    assert.equal(got.json.cron, "0 * * * *");
    assert.equal(got.json.timeZone, "UTC");
  });

  test("at most 100 schedules per agent (429 resource_exhausted)", async () => {
    const { caller, agentId } = await newAgent();
    for (let i = 0; i < 100; i++) await createSchedule(caller.token, agentId, { cron: "0 0 * * *", message: `m${i}` });
    assertError(
      await call("POST", `/v1/agents/${agentId}/schedules`, {
        token: caller.token,
        body: { cron: "0 0 * * *", message: "one more" },
      }),
      429,
      "resource_exhausted",
    );
    const page = await call("GET", `/v1/agents/${agentId}/schedules?limit=100&nextRuns=0`, { token: caller.token });
    assert.equal(page.json.items.length, 100);
    assert.equal(page.json.next, null);
  });

  test("another org's schedules are invisible (404) and its firings never run in this org", async () => {
    const { caller, agentId } = await newAgent();
    const s = await createSchedule(caller.token, agentId, { cron: "0 * * * *", message: "mine" });
    const other = identity.caller();
    assertError(await call("GET", `/v1/schedules/${s.id}`, { token: other.token }), 404, "not_found");
    assertError(
      await call("PATCH", `/v1/schedules/${s.id}`, { token: other.token, body: { enabled: false } }),
      404,
      "not_found",
    );
    assertError(await call("DELETE", `/v1/schedules/${s.id}`, { token: other.token }), 404, "not_found");
    assertError(await call("GET", `/v1/schedules/${s.id}/firings`, { token: other.token }), 404, "not_found");
    assertError(await call("GET", `/v1/agents/${agentId}/schedules`, { token: other.token }), 404, "not_found");
    assertError(
      await call("POST", `/v1/agents/${agentId}/schedules`, {
        token: other.token,
        body: { cron: "0 * * * *", message: "x" },
      }),
      404,
      "not_found",
    );
    // A session of another org cannot be a schedule's target.
    const { caller: third, agentId: thirdAgent } = await newAgent();
    const foreign = await call("POST", "/v1/sessions", { token: caller.token, body: { agentId } });
    assertError(
      await call("POST", `/v1/agents/${thirdAgent}/schedules`, {
        token: third.token,
        body: { cron: "0 * * * *", message: "x", target: "session", sessionId: foreign.json.id },
      }),
      404,
      "not_found",
    );
    const mine = await call("GET", `/v1/schedules/${s.id}`, { token: caller.token });
    assert.equal(mine.json.enabled, true);
  });

  test("API keys: read lists and reads; creating, changing and deleting need sessions:run", async () => {
    const { caller, agentId } = await newAgent();
    const s = await createSchedule(caller.token, agentId, { cron: "0 * * * *", message: "keyed" });
    const reader = identity.apiKey(["read", "agents:write"], caller.orgId);
    assert.equal((await call("GET", `/v1/agents/${agentId}/schedules`, { token: reader.token })).status, 200);
    assert.equal((await call("GET", `/v1/schedules/${s.id}`, { token: reader.token })).status, 200);
    assert.equal((await call("GET", `/v1/schedules/${s.id}/firings`, { token: reader.token })).status, 200);
    const body = { cron: "0 * * * *", message: "x" };
    assertError(
      await call("POST", `/v1/agents/${agentId}/schedules`, { token: reader.token, body }),
      403,
      "permission_denied",
    );
    assertError(
      await call("PATCH", `/v1/schedules/${s.id}`, { token: reader.token, body: { enabled: false } }),
      403,
      "permission_denied",
    );
    assertError(await call("DELETE", `/v1/schedules/${s.id}`, { token: reader.token }), 403, "permission_denied");
    const runner = identity.apiKey(["sessions:run"], caller.orgId);
    assert.equal((await call("POST", `/v1/agents/${agentId}/schedules`, { token: runner.token, body })).status, 201);
    assert.equal((await call("DELETE", `/v1/schedules/${s.id}`, { token: runner.token })).status, 204);
  });

  test("gRPC: the same service on the internal port", async () => {
    now = new Date("2026-06-07T00:00:00Z");
    const { caller, agentId } = await newAgent();
    const client = createClient(ScheduleService, grpcTransport(grpcBase));
    const headers = { authorization: `Bearer ${caller.token}` };
    const { schedule } = await client.createSchedule(
      { agentId, cron: "0 12 * * 1-5", timeZone: "America/New_York", message: "standup" },
      { headers },
    );
    assert.ok(schedule);
    assert.equal(schedule.nextRuns.length, 5);
    // Monday 8 June 2026, 12:00 EDT = 16:00Z.
    assert.equal(schedule.nextRuns[0].seconds, BigInt(Date.parse("2026-06-08T16:00:00Z") / 1000));
    const list = await client.listSchedules({ agentId, nextRuns: 0 }, { headers });
    assert.deepEqual(
      list.items.map((s) => s.id),
      [schedule.id],
    );
    assert.equal(list.items[0].nextRuns.length, 0);
    const paused = await client.updateSchedule({ id: schedule.id, enabled: false }, { headers });
    assert.equal(paused.schedule?.enabled, false);
    await assert.rejects(
      client.createSchedule({ agentId, cron: "0 12 * * 1-5", timeZone: "Moon/Base", message: "x" }, { headers }),
      (err: Error) => /timeZone/.test(err.message),
    );
    assert.deepEqual((await client.listScheduleFirings({ id: schedule.id }, { headers })).items, []);
    await client.deleteSchedule({ id: schedule.id }, { headers });
  });
});
