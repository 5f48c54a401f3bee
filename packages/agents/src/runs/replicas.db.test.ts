import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { type Database, openDatabase } from "@platform/db";
import { AgentService, type SessionEvent, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { errorInterceptor } from "@platform/rpc";
import pino from "pino";
import { ComputeSandboxes } from "../adapters/compute.ts";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { IdentityAuthenticator } from "../adapters/identity.ts";
import { createAgentsApp } from "../app.ts";
import type { AgentsDB } from "../db/schema.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { gate, ScriptedModel } from "../testing/scripted-model.ts";
import { createAgentsTestDatabase } from "../testing/database.ts";

const user = (content: string) => ({ role: "user", content });

// Two replicas of the service over one PostgreSQL database: a follower on
// one sees a run on the other through LISTEN/NOTIFY (the poll fallback is
// set to a minute, so only notifications can deliver in time), one run per
// session holds across replicas, and a cancel reaches the replica running it.

const logger = pino({ level: "silent" });
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const model = new ScriptedModel();
let shared: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
let second: Database<AgentsDB>;
const replicas: Array<Awaited<ReturnType<typeof replica>>> = [];

async function replica(database: Database<AgentsDB>, url: string, identityUrl: string, computeUrl: string) {
  const app = await createAgentsApp({
    database,
    logger,
    authenticator: new IdentityAuthenticator(grpcTransport(identityUrl)),
    sandboxes: new ComputeSandboxes(grpcTransport(computeUrl)),
    providers: new ProviderRegistry().register("scripted", model),
    pollMs: 60_000,
    runLeaseMs: 600,
    listenUrl: url,
  });
  const transport = createRouterTransport(
    (router) => {
      for (const s of app.services) router.service(s.service as never, s.impl as never);
    },
    { router: { interceptors: [errorInterceptor(logger), ...app.interceptors] } },
  );
  return { app, agents: createClient(AgentService, transport), sessions: createClient(SessionService, transport) };
}

describe("replicas", {
  skip: process.env.TEST_DB === "pglite" ? "PGlite is one process: there are no other replicas" : false,
}, () => {
  before(async () => {
    shared = await createAgentsTestDatabase();
    const identityUrl = await identity.start();
    const computeUrl = await compute.start();
    second = await openDatabase<AgentsDB>({ url: shared.url!, maxConnections: 5 });
    replicas.push(await replica(shared, shared.url!, identityUrl, computeUrl));
    replicas.push(await replica(second, shared.url!, identityUrl, computeUrl));
  });
  after(async () => {
    for (const r of replicas) await r.app.stop();
    await second?.close();
    await shared?.close();
    await identity.stop();
    await compute.stop();
  });

  /** Both replicas, a caller and a new session created through replica A. */
  async function onReplicaA(slug: string) {
    const [a, b] = replicas as [Awaited<ReturnType<typeof replica>>, Awaited<ReturnType<typeof replica>>];
    const caller = identity.caller();
    const auth = { headers: { authorization: `Bearer ${caller.token}` } };
    const { agent } = await a.agents.createAgent({ name: slug, slug, model: "scripted/x" }, auth);
    const { session } = await a.sessions.createSession({ agentId: agent!.id }, auth);
    return { a, b, auth, session };
  }

  test("a follower on replica B gets the live events of a run on replica A; B cannot start a second run; B's cancel stops A's run", async () => {
    const { a, b, auth, session } = await onReplicaA("r");
    const step = gate();
    const hold = gate();
    model.push([
      { type: "text", text: "one" },
      { type: "wait", until: step.promise },
      { type: "text", text: "two" },
      { type: "wait", until: hold.promise },
    ]);
    const run = a.sessions
      .sendMessages({ id: session!.id, messages: [{ role: "user", content: "go" }] }, auth)
      [Symbol.asyncIterator]();
    assert.equal((await run.next()).value?.content, "one");

    const follower = b.sessions.streamEvents({ id: session!.id, after: 1n }, auth)[Symbol.asyncIterator]();
    assert.equal((await follower.next()).value?.content, "one", "replayed from the log");
    step.open();
    assert.equal((await follower.next()).value?.content, "two", "live, woken by NOTIFY from replica A");

    await assert.rejects(
      (async () => {
        for await (const _ of b.sessions.sendMessages(
          // `reject`: the 409 of before queues (the default queues the send behind A's run).
          { id: session!.id, messages: [{ role: "user", content: "also" }], mode: "reject" },
          auth,
        ));
      })(),
      (err: unknown) => ConnectError.from(err).code === Code.Aborted,
    );

    assert.equal((await b.sessions.cancelRun({ id: session!.id }, auth)).cancelled, true);
    const last = await follower.next();
    assert.equal(
      (last.value as SessionEvent | undefined)?.type,
      "error",
      "replica A saw the cancel flag and ended the run",
    );
    assert.equal((await follower.next()).done, true);
    hold.open();
    const rest: SessionEvent[] = [];
    for (let r = await run.next(); !r.done; r = await run.next()) rest.push(r.value);
    assert.deepEqual(
      rest.map((e) => e.type),
      ["text", "error"],
    );
  });

  test("a follower on replica B receives every fragment of a run on A, with the seqs, contents and times A streamed", async () => {
    const { a, b, auth, session } = await onReplicaA("f");
    const start = gate();
    const middle = gate();
    const words = Array.from({ length: 40 }, (_, i) => ({ type: "text" as const, text: `w${i} ` }));
    model.push([
      words[0]!,
      { type: "wait", until: start.promise },
      ...words.slice(1, 20),
      { type: "wait", until: middle.promise },
      ...words.slice(20),
    ]);
    const run = a.sessions.sendMessages({ id: session!.id, messages: [user("go")] }, auth)[Symbol.asyncIterator]();
    const sent = [(await run.next()).value as SessionEvent];
    const follower = b.sessions.streamEvents({ id: session!.id, after: 0n }, auth)[Symbol.asyncIterator]();
    assert.equal((await follower.next()).value?.type, "user");
    start.open();
    for (let i = 1; i < 20; i++) sent.push((await run.next()).value as SessionEvent);
    middle.open();
    for (let r = await run.next(); !r.done; r = await run.next()) sent.push(r.value);
    const seen: SessionEvent[] = [];
    for (let r = await follower.next(); !r.done; r = await follower.next()) seen.push(r.value);
    const shape = (e: SessionEvent) => [e.seq, e.type, e.content, e.createdAt?.seconds, e.createdAt?.nanos];
    assert.equal(sent.length, 41);
    assert.deepEqual(seen.map(shape), sent.map(shape));
  });
});
