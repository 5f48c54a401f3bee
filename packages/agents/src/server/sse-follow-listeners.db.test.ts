import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import * as http from "node:http";
import { after, before, test } from "node:test";
import { IdentityDouble } from "@platform/identity-client/testing";
import pino from "pino";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import type { ModelEvent, ModelProvider } from "../providers/provider.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { createAgentsTestDatabase } from "../testing/database.ts";

// What an idle SSE follower holds on its call's abort signal (issue 26, bench
// sse-streams: thousands of followers in one process). The follow listens to
// the signal itself (its box: the abort ends it); the direct transport's call
// output, parked on it, relies on that and keeps no listener of its own: one
// listener a follower, not two (each a Listener with a callback closure).

/** Every AbortSignal something listened to since the test began (to count what each still holds). */
const signals = new Set<AbortSignal>();
const add = EventTarget.prototype.addEventListener;
EventTarget.prototype.addEventListener = function (this: EventTarget, ...args: Parameters<typeof add>) {
  if (this instanceof AbortSignal && args[0] === "abort") signals.add(this);
  return add.apply(this, args);
};

/** Abort listeners on the signals not aborted yet. */
function liveAbortListeners(): number {
  let n = 0;
  for (const s of signals) if (!s.aborted) n += getEventListeners(s, "abort").length;
  return n;
}

/** One text token, then nothing until the run is aborted: a session whose run stays open and idle. */
class IdleModel implements ModelProvider {
  async start(_request: unknown, signal: AbortSignal): Promise<AsyncIterable<ModelEvent>> {
    return (async function* (): AsyncGenerator<ModelEvent> {
      yield { type: "text", text: "open" };
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener("abort", () => resolve(), { once: true });
      });
      yield { type: "stop", reason: "end_turn" };
    })();
  }
}

let service: AgentsServer;
let base: URL;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();
let token: string;

before(async () => {
  database = await createAgentsTestDatabase();
  const config = testAgentsConfig({ identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() });
  service = await createAgentsServer(config, pino({ level: "silent" }), {
    database,
    internalTls: undefined,
    providers: new ProviderRegistry().register("idle", new IdleModel()),
  });
  base = new URL((await service.listen()).url);
  token = identity.caller().token;
});
after(async () => {
  await service?.close();
  await identity.stop();
  await compute.stop();
  await database?.close();
});

async function json<T>(method: string, path: string, body: unknown): Promise<T> {
  const res = await fetch(new URL(path, base), {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

/** Opens an SSE stream, resolved once its first bytes arrived; it stays open until destroyed. */
function open(
  path: string,
  method: string,
  body?: string,
): Promise<{ req: http.ClientRequest; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    let closed!: () => void;
    const gone = new Promise<void>((r) => (closed = r));
    const req = http.request(
      {
        host: base.hostname,
        port: base.port,
        path,
        method,
        headers: {
          authorization: `Bearer ${token}`,
          accept: "text/event-stream",
          ...(body ? { "content-type": "application/json" } : {}),
        },
      },
      (res) => {
        assert.equal(res.statusCode, 200);
        res.once("data", () => resolve({ req, closed: gone }));
        res.on("close", closed);
        res.on("error", () => {});
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

test("an idle SSE follower holds one abort listener (its follow's), and its client gone still ends it", async () => {
  const agent = await json<{ id: string }>("POST", "/v1/agents", { name: "idle", slug: "idle", model: "idle/forever" });
  const session = await json<{ id: string }>("POST", "/v1/sessions", { agentId: agent.id });
  const run = await open(
    `/v1/sessions/${session.id}/messages`,
    "POST",
    JSON.stringify({ messages: [{ role: "user", content: "wait" }] }),
  );
  try {
    await settle();
    const before = liveAbortListeners();
    const followers = [];
    for (let i = 0; i < 4; i++) followers.push(await open(`/v1/sessions/${session.id}/events`, "GET"));
    await settle();
    const added = liveAbortListeners() - before;
    assert.equal(added, 4, `4 idle followers hold ${added} abort listeners (one each expected)`);

    // Still live: a follower parked without the call output's listener is woken by its follow's.
    for (const f of followers) f.req.destroy();
    await Promise.all(followers.map((f) => f.closed));
    for (let i = 0; i < 100 && liveAbortListeners() > before; i++) await new Promise((r) => setTimeout(r, 5));
    assert.equal(liveAbortListeners(), before, "each follower's listener went with its client");

    // The session's run is still followed by a new follower after the others left.
    const late = await open(`/v1/sessions/${session.id}/events`, "GET");
    await settle();
    assert.equal(liveAbortListeners() - before, 1);
    late.req.destroy();
    await late.closed;
  } finally {
    run.req.destroy();
    await fetch(new URL(`/v1/sessions/${session.id}/cancel`, base), {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}",
    }).catch(() => {});
  }
});
