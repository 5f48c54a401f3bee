import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { type Database, openDatabase } from "@platform/db";
import { testServerUrl } from "@platform/db/testing";
import { type PrivateCluster, postgresBinDir, startPrivateCluster } from "@platform/db/testing-pg-cluster";
import { AgentService, type SessionEvent, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { errorInterceptor } from "@platform/rpc";
import pino from "pino";
import { ComputeSandboxes } from "../adapters/compute.ts";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { IdentityAuthenticator } from "../adapters/identity.ts";
import { createAgentsApp } from "../app.ts";
import type { AgentsDB } from "../db/schema.ts";
import type { Store } from "../domain/store.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { createAgentsTestDatabase } from "../testing/database.ts";
import { gate, ScriptedModel } from "../testing/scripted-model.ts";

// The database becomes unreachable in the middle of a run, then comes back.
// On PostgreSQL it is a private server of this test, stopped and started
// (the shared one is never touched); PGlite runs inside the process and
// cannot be stopped, so there a store that fails as an unreachable database
// stands in. Whatever a client was streamed must be what the log holds
// under the same ids, and the run must end with a terminal event in the log
// once the database is back, leaving the session idle.

const onPostgres = testServerUrl() !== undefined;
const logger = pino({ level: process.env.LOG_LEVEL ?? "silent" });
const identity = new IdentityDouble();
const compute = new ComputeDouble();
const model = new ScriptedModel();
let cluster: PrivateCluster | undefined;
let database: Database<AgentsDB>;
/** PGlite only: while set, the store fails every call as a database that cannot be reached. */
let unreachable = false;
/** Between down() and up(). */
let outage = false;

/** The store of an unreachable database: every call fails as pg does when the server is down. */
function failingWhileDown(store: Store): Store {
  return new Proxy(store, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (unreachable)
          return Promise.reject(
            Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" }),
          );
        return value.apply(target, args);
      };
    },
  });
}

function down() {
  outage = true;
  if (cluster) cluster.stop("immediate");
  else unreachable = true;
}

function up() {
  if (cluster) cluster.start();
  else unreachable = false;
  outage = false;
}

before(async () => {
  await identity.start();
  await compute.start();
  if (onPostgres) {
    cluster = await startPrivateCluster();
    database = await openDatabase<AgentsDB>({
      url: await cluster.database("agents_outage"),
      maxConnections: 5,
      minConnections: 0,
    });
  } else {
    database = await createAgentsTestDatabase();
  }
});
after(async () => {
  await database?.close().catch(() => {});
  cluster?.destroy();
  await identity.stop();
  await compute.stop();
});

async function service(leaseMs: number) {
  const app = await createAgentsApp({
    database,
    logger,
    authenticator: new IdentityAuthenticator(grpcTransport(identity.url)),
    sandboxes: new ComputeSandboxes(grpcTransport(compute.url)),
    providers: new ProviderRegistry().register("scripted", model),
    runLeaseMs: leaseMs,
    decorateStore: onPostgres ? undefined : failingWhileDown,
  });
  const transport = createRouterTransport(
    (router) => {
      for (const s of app.services) router.service(s.service as never, s.impl as never);
    },
    { router: { interceptors: [errorInterceptor(logger), ...app.interceptors] } },
  );
  return { app, agents: createClient(AgentService, transport), sessions: createClient(SessionService, transport) };
}

const shape = (e: SessionEvent) => [
  e.seq,
  e.type,
  e.content,
  e.toolUseId,
  e.isError,
  e.createdAt?.seconds,
  e.createdAt?.nanos,
];

/**
 * A run streams "a", then the database goes down; the model goes on ("b", a
 * tool call) while it is down; after `outageMs` it is back. Returns what the
 * client received and the log once the run ended.
 */
async function runThroughOutage(leaseMs: number, outageMs: number) {
  const s = await service(leaseMs);
  try {
    const caller = identity.caller();
    const auth = { headers: { authorization: `Bearer ${caller.token}` } };
    const { agent } = await s.agents.createAgent(
      { name: "o", slug: `o-${Math.random().toString(36).slice(2)}`, model: "scripted/x" },
      auth,
    );
    const { session } = await s.sessions.createSession({ agentId: agent!.id }, auth);
    const resume = gate();
    model.push(
      [
        { type: "text", text: "a" },
        { type: "wait", until: resume.promise },
        { type: "text", text: "b" },
        { type: "tool_use", call: { id: "call-1", name: "list_files", input: {} } },
      ],
      [{ type: "text", text: "after the tool" }],
    );
    const live = s.sessions
      .sendMessages({ id: session!.id, messages: [{ role: "user", content: "go" }] }, auth)
      [Symbol.asyncIterator]();
    const received: SessionEvent[] = [(await live.next()).value as SessionEvent];
    assert.equal(received[0]?.content, "a");

    down();
    resume.open();
    const during: SessionEvent[] = [];
    const collecting = (async () => {
      for (let r = await live.next(); !r.done; r = await live.next()) {
        if (outage) during.push(r.value);
        received.push(r.value);
      }
    })();
    await new Promise((r) => setTimeout(r, outageMs));
    up();
    await collecting;
    await s.app.runner.idle();

    const read = await s.sessions.getSession({ id: session!.id }, auth);
    return { received, during, log: read.events, status: read.session?.status };
  } finally {
    await s.app.stop();
  }
}

function assertConsistent(received: SessionEvent[], log: SessionEvent[]) {
  const bySeq = new Map(log.map((e) => [e.seq, e]));
  for (const e of received) {
    const stored = bySeq.get(e.seq);
    assert.ok(stored, `seq ${e.seq} (${e.type}) was streamed but is not in the log`);
    assert.deepEqual(shape(stored), shape(e), `seq ${e.seq} names the same event in the log as on the stream`);
  }
  for (const [i, e] of log.entries()) assert.equal(e.seq, BigInt(i + 1), "the log is gapless");
  assert.ok(["done", "error"].includes(log.at(-1)?.type ?? ""), "the log ends with a terminal event");
  assert.deepEqual(
    received.slice(-1).map(shape),
    log.slice(-1).map(shape),
    "the client got the terminal event the log holds",
  );
}

describe("the database unreachable during a run", {
  skip: onPostgres && !postgresBinDir() ? "no PostgreSQL server binaries for a private cluster" : false,
}, () => {
  test("shorter than the lease: nothing is streamed while it is down; the run then goes on to done; the stream is the log", async () => {
    const { received, during, log, status } = await runThroughOutage(30_000, 3000);
    assert.deepEqual(during, [], "no event reaches a client while it cannot be stored");
    assert.deepEqual(
      log.map((e) => e.type),
      ["user", "text", "text", "tool_use", "tool_result", "text", "done"],
    );
    assert.deepEqual(received.map(shape), log.slice(1).map(shape), "the client saw exactly the log");
    assertConsistent(received, log);
    assert.equal(status, "idle");
  });

  test("longer than the lease: the run stops and, once the database is back, stores its end; the session is idle", async () => {
    const { received, during, log, status } = await runThroughOutage(1500, 5000);
    assert.deepEqual(during, []);
    assertConsistent(received, log);
    assert.equal(log.at(-1)?.type, "error");
    assert.match(log.at(-1)!.content, /database was unreachable/);
    assert.equal(status, "idle");
  });
});
