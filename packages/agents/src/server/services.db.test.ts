import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Harness, startHarness } from "../testing/harness.ts";

let h: Harness;
before(async () => {
  h = await startHarness();
});
after(async () => {
  await h?.close();
});

async function rejects(promise: Promise<unknown>, code: Code, pattern?: RegExp) {
  await assert.rejects(promise, (err: unknown) => {
    const e = ConnectError.from(err);
    assert.equal(e.code, code, `expected ${Code[code]}, got ${Code[e.code]}: ${e.rawMessage}`);
    if (pattern) assert.match(e.rawMessage, pattern);
    return true;
  });
}

describe("authentication", () => {
  test("a call without a bearer token is unauthenticated and identity is not asked", async () => {
    const before = h.identity.verifyCalls;
    await rejects(h.agents.listAgents({}), Code.Unauthenticated);
    assert.equal(h.identity.verifyCalls, before);
  });

  test("an unknown token is unauthenticated after asking identity; a malformed one without asking", async () => {
    const before = h.identity.verifyCalls;
    const unknown = `${Buffer.from('{"alg":"RS256"}').toString("base64url")}.e30.c2lnbmF0dXJl`;
    await rejects(h.agents.listAgents({}, h.as({ token: unknown })), Code.Unauthenticated);
    assert.equal(h.identity.verifyCalls, before + 1);
    await rejects(h.agents.listAgents({}, h.as({ token: "nope" })), Code.Unauthenticated);
    assert.equal(h.identity.verifyCalls, before + 1);
  });

  test("every call asks identity (no cache)", async () => {
    const caller = h.identity.caller();
    const before = h.identity.verifyCalls;
    await h.agents.listAgents({}, h.as(caller));
    await h.agents.listAgents({}, h.as(caller));
    assert.equal(h.identity.verifyCalls, before + 2);
  });
});

describe("agents", () => {
  test("create returns the agent with id and times; get returns it", async () => {
    const caller = h.identity.caller();
    const { agent } = await h.agents.createAgent(
      { name: "Helper", slug: "helper", model: "dev/echo", systemPrompt: "be brief" },
      h.as(caller),
    );
    assert.ok(agent);
    assert.match(agent.id, /^[0-9a-f-]{36}$/);
    assert.equal(agent.slug, "helper");
    assert.equal(agent.systemPrompt, "be brief");
    assert.ok(agent.createdAt && agent.updatedAt);
    const got = await h.agents.getAgent({ id: agent.id }, h.as(caller));
    assert.equal(got.agent?.name, "Helper");
  });

  test("missing fields are invalid_argument", async () => {
    const caller = h.identity.caller();
    await rejects(
      h.agents.createAgent({ name: "", slug: "a", model: "dev/x" }, h.as(caller)),
      Code.InvalidArgument,
      /name/,
    );
    await rejects(
      h.agents.createAgent({ name: "a", slug: "", model: "dev/x" }, h.as(caller)),
      Code.InvalidArgument,
      /slug/,
    );
    await rejects(
      h.agents.createAgent({ name: "a", slug: "a", model: "" }, h.as(caller)),
      Code.InvalidArgument,
      /model/,
    );
  });

  test("a slug taken in the org is already_exists; another org may use it", async () => {
    const a = h.identity.caller();
    const b = h.identity.caller();
    await h.agents.createAgent({ name: "x", slug: "dup", model: "dev/x" }, h.as(a));
    await rejects(h.agents.createAgent({ name: "y", slug: "dup", model: "dev/x" }, h.as(a)), Code.AlreadyExists, /dup/);
    await h.agents.createAgent({ name: "x", slug: "dup", model: "dev/x" }, h.as(b));
  });

  test("another org's agent is not_found; a malformed id is invalid_argument", async () => {
    const a = h.identity.caller();
    const b = h.identity.caller();
    const { agent } = await h.agents.createAgent({ name: "x", slug: "mine", model: "dev/x" }, h.as(a));
    await rejects(h.agents.getAgent({ id: agent!.id }, h.as(b)), Code.NotFound);
    await rejects(h.agents.getAgent({ id: "not-a-uuid" }, h.as(a)), Code.InvalidArgument);
  });

  test("list pages newest first, only the caller's org, with a limit of 1..100", async () => {
    const a = h.identity.caller();
    const other = h.identity.caller();
    await h.agents.createAgent({ name: "o", slug: "o", model: "dev/x" }, h.as(other));
    for (let i = 0; i < 5; i++) await h.agents.createAgent({ name: `n${i}`, slug: `s${i}`, model: "dev/x" }, h.as(a));
    const first = await h.agents.listAgents({ limit: 2 }, h.as(a));
    assert.deepEqual(
      first.items.map((x) => x.slug),
      ["s4", "s3"],
    );
    assert.ok(first.next);
    const second = await h.agents.listAgents({ limit: 2, after: first.next }, h.as(a));
    assert.deepEqual(
      second.items.map((x) => x.slug),
      ["s2", "s1"],
    );
    const third = await h.agents.listAgents({ limit: 2, after: second.next }, h.as(a));
    assert.deepEqual(
      third.items.map((x) => x.slug),
      ["s0"],
    );
    assert.equal(third.next, undefined);
    const all = await h.agents.listAgents({}, h.as(a));
    assert.equal(all.items.length, 5);
    await rejects(h.agents.listAgents({ limit: 0 }, h.as(a)), Code.InvalidArgument, /limit/);
    await rejects(h.agents.listAgents({ limit: 101 }, h.as(a)), Code.InvalidArgument, /limit/);
    await rejects(h.agents.listAgents({ after: "garbage!" }, h.as(a)), Code.InvalidArgument, /cursor/);
    assert.equal((await h.agents.listAgents({ limit: 100 }, h.as(a))).items.length, 5);
  });
});

describe("sessions", () => {
  test("create and get a session; another org's session or agent is not_found", async () => {
    const a = h.identity.caller();
    const b = h.identity.caller();
    const { agent } = await h.agents.createAgent({ name: "x", slug: "x", model: "dev/x" }, h.as(a));
    const { session } = await h.sessions.createSession({ agentId: agent!.id }, h.as(a));
    assert.equal(session?.agentId, agent!.id);
    assert.equal(session?.status, "idle");
    assert.equal(session?.lastSeq, 0n);
    const got = await h.sessions.getSession({ id: session!.id }, h.as(a));
    assert.equal(got.session?.id, session!.id);
    assert.deepEqual(got.events, []);
    await rejects(h.sessions.getSession({ id: session!.id }, h.as(b)), Code.NotFound);
    await rejects(h.sessions.createSession({ agentId: agent!.id }, h.as(b)), Code.NotFound);
    await rejects(h.sessions.createSession({ agentId: "nope" }, h.as(a)), Code.InvalidArgument);
    await rejects(h.sessions.createSession({ agentId: "" }, h.as(a)), Code.InvalidArgument);
    await rejects(h.sessions.getSession({ id: "123" }, h.as(a)), Code.InvalidArgument);
  });
});
