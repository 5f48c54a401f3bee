import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { createAgentsTestDatabase } from "../testing/database.ts";

// Issue 18 item 3 on the real server (REST + SSE, dev model, compute double
// with one workspace per session): a tool call that finds the session's
// sandbox PAUSED records sandbox_paused then sandbox_resumed and reads the
// file written before; one that finds it FAILED, DESTROYED or unknown records
// sandbox_replaced (old id, new id, why) and reads the same file in the new
// sandbox. The events are streamed, stored, replayed and listed like the
// others, and the model never sees them.

let service: AgentsServer;
let base: string;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
let auth: Record<string, string>;
let agentId: string;

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;
type Frame = { id: number; data: Json };

before(async () => {
  database = await createAgentsTestDatabase();
  const config = testAgentsConfig(
    { identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() },
    { toolTimeoutMs: 30_000 },
  );
  service = await createAgentsServer(config, pino({ level: process.env.LOG_LEVEL ?? "silent" }), {
    providers: new ProviderRegistry().register("dev", new DevModel()),
    database,
    pollMs: 200,
    internalTls: undefined,
  });
  base = (await service.listen()).url;
  auth = { authorization: `Bearer ${identity.caller().token}`, "content-type": "application/json" };
  agentId = (await json("POST", "/v1/agents", { name: "S", slug: "s", model: "dev/echo" })).id;
});
after(async () => {
  await service?.close();
  await identity.stop();
  await compute.stop();
  await database?.close();
});

async function json(method: string, path: string, body?: unknown): Promise<Json> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: auth,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = (await res.json()) as Json;
  assert.ok(res.status === 200 || res.status === 201, `${res.status} ${JSON.stringify(out)}`);
  return out;
}

/** The SSE frames of a response. */
async function frames(res: Response): Promise<Frame[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .map((block) => block.split("\n"))
    .filter((lines) => lines.some((l) => l.startsWith("data:")))
    .map((lines) => ({
      id: Number(lines.find((l) => l.startsWith("id:"))?.slice(3)),
      data: JSON.parse(lines.find((l) => l.startsWith("data:"))!.slice(5)) as Json,
    }));
}

/** Sends one user message and returns the whole SSE reply (to `done`). */
async function send(session: string, content: string): Promise<Frame[]> {
  const res = await fetch(`${base}/v1/sessions/${session}/messages`, {
    method: "POST",
    headers: { ...auth, accept: "text/event-stream" },
    body: JSON.stringify({ messages: [{ role: "user", content }] }),
  });
  assert.equal(res.status, 200);
  const live = await frames(res);
  assert.equal(live.at(-1)?.data.type, "done", JSON.stringify(live.map((f) => f.data)));
  return live;
}

const one = (live: Frame[], type: string): Frame => {
  const found = live.filter((f) => f.data.type === type);
  assert.equal(found.length, 1, `one ${type} in ${live.map((f) => f.data.type).join(",")}`);
  return found[0]!;
};
const sandboxTypes = (live: Frame[]) => live.map((f) => f.data.type).filter((t: string) => t.startsWith("sandbox_"));

/** A session whose sandbox holds notes.txt (written by a tool call); returns the session, token and sandbox. */
async function sessionWithFile(): Promise<{ session: string; token: string; sandboxId: string }> {
  const session = (await json("POST", "/v1/sessions", { agentId })).id as string;
  const token = `kept-${randomUUID()}`;
  const first = await send(session, `/write notes.txt ${token}`);
  assert.equal(one(first, "tool_result").data.isError ?? false, false);
  assert.deepEqual(sandboxTypes(first), [], "a session's first sandbox is no replacement");
  const sandboxId = (await json("GET", `/v1/sessions/${session}`)).session.sandboxId as string;
  assert.ok(sandboxId);
  return { session, token, sandboxId };
}

/** The stored log (GetSession) and a replay (GET .../events) agree with what was streamed live. */
async function assertStored(session: string, live: Frame[]): Promise<void> {
  const streamed = live.filter((f) => f.data.type.startsWith("sandbox_"));
  const { events } = await json("GET", `/v1/sessions/${session}`);
  const replay = await frames(
    await fetch(`${base}/v1/sessions/${session}/events?after=0`, { headers: { ...auth, accept: "text/event-stream" } }),
  );
  for (const f of streamed) {
    const stored = (events as Json[]).find((e) => Number(e.seq) === f.id);
    assert.ok(stored, `event ${f.id} is in the log`);
    assert.equal(stored.type, f.data.type);
    assert.equal(stored.content, f.data.content);
    assert.equal(stored.toolUseId, f.data.toolUseId);
    const replayed = replay.find((r) => r.id === f.id);
    assert.equal(replayed?.data.type, f.data.type, `event ${f.id} is replayed`);
  }
}

describe("sandbox events in the session log", () => {
  test("a tool call after the sandbox was paused records sandbox_paused then sandbox_resumed and reads the file", async () => {
    const { session, token, sandboxId } = await sessionWithFile();
    compute.pause(sandboxId);
    const live = await send(session, "/read notes.txt");
    assert.deepEqual(sandboxTypes(live), ["sandbox_paused", "sandbox_resumed"]);
    const use = one(live, "tool_use");
    const paused = one(live, "sandbox_paused");
    const resumed = one(live, "sandbox_resumed");
    const result = one(live, "tool_result");
    assert.ok(use.id < paused.id && paused.id < resumed.id && resumed.id < result.id, "between tool_use and result");
    for (const f of [paused, resumed]) {
      assert.equal(f.data.toolUseId, use.data.toolUseId, "names the tool call");
      assert.deepEqual(JSON.parse(f.data.content), { sandboxId });
    }
    assert.equal(JSON.parse(result.data.content).content, token, "the file is still there");
    assert.deepEqual(
      compute.resumeCalls.filter((c) => c.sandboxId === sandboxId),
      [{ sandboxId, by: "ResumeSandbox" }],
      "resumed explicitly before the call",
    );
    assert.equal((await json("GET", `/v1/sessions/${session}`)).session.sandboxId, sandboxId, "the same sandbox");
    // The model got the tool result, not the sandbox events (the dev model summarises the last message).
    assert.match(
      live
        .filter((f) => f.data.type === "text")
        .map((f) => f.data.content)
        .join(""),
      /^The tool returned: .*kept-/s,
    );
    await assertStored(session, live);

    // A running sandbox: nothing to record.
    const next = await send(session, "/read notes.txt");
    assert.deepEqual(sandboxTypes(next), []);
  });

  for (const [why, makeGone] of [
    ["failed", (id: string) => compute.fail(id)],
    ["destroyed", (id: string) => compute.destroyed.add(id)],
    ["not_found", (id: string) => compute.forget(id)],
  ] as const) {
    test(`a tool call after the sandbox is gone (${why}) records sandbox_replaced and reads the same file`, async () => {
      const { session, token, sandboxId } = await sessionWithFile();
      makeGone(sandboxId);
      const live = await send(session, "/read notes.txt");
      assert.deepEqual(sandboxTypes(live), ["sandbox_replaced"]);
      const use = one(live, "tool_use");
      const replaced = one(live, "sandbox_replaced");
      const result = one(live, "tool_result");
      assert.ok(use.id < replaced.id && replaced.id < result.id);
      assert.equal(replaced.data.toolUseId, use.data.toolUseId);
      const now = (await json("GET", `/v1/sessions/${session}`)).session.sandboxId as string;
      assert.notEqual(now, sandboxId, "a new sandbox");
      assert.deepEqual(JSON.parse(replaced.data.content), {
        previousSandboxId: sandboxId,
        sandboxId: now,
        reason: why,
      });
      assert.equal(JSON.parse(result.data.content).content, token, "the session's workspace, in the new sandbox");
      await assertStored(session, live);

      const next = await send(session, "/read notes.txt");
      assert.deepEqual(sandboxTypes(next), [], "the new sandbox is reused");
      assert.equal(JSON.parse(one(next, "tool_result").data.content).content, token);
    });
  }
});
