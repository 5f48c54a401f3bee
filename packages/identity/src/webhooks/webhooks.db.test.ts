// Issue 25 items 1, 2 and 4 (webhooks), through the real identity server:
// endpoints managed over REST, events published over the internal gRPC port
// with the agents certificate, deliveries sent by delivery workers on a
// controllable clock to a receiver on 127.0.0.1 and verified there by the
// reference library (`standardwebhooks`). Retries, a restart in the middle of
// a retry schedule, two replicas sharing the outbox, SSRF refusals, rotation,
// automatic disabling, redelivery, bad input.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, afterEach, before, describe, test } from "node:test";
import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { WebhookEventService } from "@platform/gen/identity/v1/webhooks_pb";
import { Webhook as Verifier } from "standardwebhooks";
import { type TestServer, startTestServer } from "../testing/server.ts";
import type { DeliverySettings } from "./delivery-worker.ts";

type Received = { headers: IncomingHttpHeaders; body: string; status: number };

/** An HTTP receiver on 127.0.0.1 answering 500 to the first `failures` requests, then 204. */
async function receiver(
  options: { failures?: number; answer?: (n: number) => [number, Record<string, string>?] } = {},
) {
  const got: Received[] = [];
  let failures = options.failures ?? 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      let status = 204;
      let headers: Record<string, string> = {};
      if (options.answer) [status, headers = {}] = options.answer(got.length + 1);
      else if (failures > 0) {
        failures--;
        status = 500;
      }
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8"), status });
      res.writeHead(status, headers);
      res.end(status >= 300 ? "nope" : undefined);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    got,
    set failures(n: number) {
      failures = n;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

let s: TestServer;
let owner: string;
let orgId: string;
let publisher: ReturnType<typeof createClient<typeof WebhookEventService>>;
let n = 0;
const idem = () => `idem-${process.pid}-${Date.now()}-${n++}`;

// The workers' clock: the wall clock (events queued by the server are due at
// once) plus what a test moved it forward by, back to the wall clock after
// each test; it stays within a minute or two of the wall clock, inside
// standardwebhooks' 5-minute tolerance.
let offset = 0;
const clock = () => new Date(Date.now() + offset);
const FAST: Partial<DeliverySettings> = {
  allowPrivateTargets: true,
  retryBaseMs: 10_000,
  retryMaxMs: 80_000,
  maxAttempts: 5,
  timeoutMs: 3000,
  disableAfterFailures: 1000,
};
const worker = (settings: Partial<DeliverySettings> = {}) =>
  s.identity.newWebhookWorker({ clock, settings: { ...FAST, ...settings } });

before(async () => {
  s = await startTestServer();
  // The app's own worker polls on the wall clock: the tests drive workers of their own.
  await s.identity.webhookWorker.stop();
  owner = (await s.login()).access_token;
  orgId = JSON.parse(Buffer.from(owner.split(".")[1]!, "base64url").toString()).org_id;
  publisher = createClient(WebhookEventService, s.grpcTransport("agents"));
});
after(() => s.close());

async function createHook(url: string, eventTypes: string[] = ["session.idle"], extra: Record<string, unknown> = {}) {
  const r = await s.call("POST", `/v1/orgs/${orgId}/webhooks`, {
    token: owner,
    idem: idem(),
    body: { url, event_types: eventTypes, ...extra },
  });
  assert.equal(r.status, 201, r.text);
  made.push(r.json.webhook.id);
  return { id: r.json.webhook.id as string, secret: r.json.secret as string, webhook: r.json.webhook };
}

// Each test's endpoints are disabled after it (passed or not), so no later test's worker sends to them.
const made: string[] = [];
afterEach(async () => {
  for (const id of made.splice(0)) await disable(id);
  offset = 0;
});

async function publish(type = "session.idle", data: JsonObject = { session_id: randomUUID() }) {
  const id = randomUUID();
  const res = await publisher.publishWebhookEvents({
    events: [{ id, orgId, type, occurredAt: timestampFromDate(new Date()), data }],
  });
  return { id, accepted: res.accepted };
}

async function deliveries(hookId: string) {
  const r = await s.call("GET", `/v1/orgs/${orgId}/webhooks/${hookId}/deliveries?limit=100`, { token: owner });
  assert.equal(r.status, 200, r.text);
  return r.json.items as {
    id: string;
    status: string;
    attempt_count: number;
    attempts: { number: number; status_code: number; response_excerpt: string; error: string; latency_ms: number }[];
  }[];
}

const verify = (secret: string, r: Received) =>
  new Verifier(secret).verify(r.body, {
    "webhook-id": String(r.headers["webhook-id"]),
    "webhook-timestamp": String(r.headers["webhook-timestamp"]),
    "webhook-signature": String(r.headers["webhook-signature"]),
  });

const disable = (id: string) =>
  s.call("PATCH", `/v1/orgs/${orgId}/webhooks/${id}`, { token: owner, idem: idem(), body: { enabled: false } });

describe("webhooks", () => {
  test("endpoints: the secret is shown once (create), never by list or get, and is not stored in clear", async () => {
    const r = await createHook("https://hooks.example.com/x", ["session.idle", "run.failed"]);
    assert.match(r.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.deepEqual(r.webhook.event_types, ["session.idle", "run.failed"]);
    assert.equal(r.webhook.enabled, true);
    const list = await s.call("GET", `/v1/orgs/${orgId}/webhooks`, { token: owner });
    const got = await s.call("GET", `/v1/orgs/${orgId}/webhooks/${r.id}`, { token: owner });
    assert.equal(list.status, 200);
    assert.equal(got.status, 200);
    assert.ok(list.json.some((w: { id: string }) => w.id === r.id));
    for (const text of [list.text, got.text]) {
      assert.ok(!text.includes(r.secret.slice(6)), "secret in a read");
      assert.ok(!text.includes('secret"'), "a secret field in a read");
    }
    const row = await s.identity.db
      .selectFrom("webhook_endpoints")
      .select("secret_sealed")
      .where("id", "=", r.id)
      .executeTakeFirstOrThrow();
    const stored = Buffer.from(row.secret_sealed);
    assert.ok(!stored.includes(Buffer.from(r.secret)) && !stored.includes(Buffer.from(r.secret.slice(6), "base64")));
    // Rotation shows the new secret once; the webhook says until when the old one signs.
    const rot = await s.call("POST", `/v1/orgs/${orgId}/webhooks/${r.id}/rotate-secret`, {
      token: owner,
      idem: idem(),
    });
    assert.equal(rot.status, 200, rot.text);
    assert.match(rot.json.secret, /^whsec_/);
    assert.notEqual(rot.json.secret, r.secret);
    assert.ok(rot.json.webhook.previous_secret_expires_at);
    const del = await s.call("DELETE", `/v1/orgs/${orgId}/webhooks/${r.id}`, { token: owner, idem: idem() });
    assert.equal(del.status, 204);
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}/webhooks/${r.id}`, { token: owner })).status, 404);
  });

  test("bad input: 400 naming the field (url, event_types, limit), unknown ids 404, other orgs 404", async () => {
    const post = (body: unknown) => s.call("POST", `/v1/orgs/${orgId}/webhooks`, { token: owner, idem: idem(), body });
    for (const [body, field] of [
      [{ url: "not a url", event_types: ["session.idle"] }, "url"],
      [{ url: "ftp://example.com/x", event_types: ["session.idle"] }, "url"],
      [{ url: "https://u:p@example.com/x", event_types: ["session.idle"] }, "url"],
      [{ url: "", event_types: ["session.idle"] }, "url"],
      [{ url: `https://example.com/${"a".repeat(3000)}`, event_types: ["session.idle"] }, "url"],
      [{ url: "https://example.com/x", event_types: [] }, "event_types"],
      [{ url: "https://example.com/x", event_types: ["session.idle", "session.exploded"] }, "event_types"],
      [{ url: "https://example.com/x", event_types: ["session.idle"], description: "d".repeat(501) }, "description"],
    ] as const) {
      const r = await post(body);
      assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${r.text}`);
      assert.equal(r.json.code, "invalid_request");
      assert.equal(r.json.field, field, r.text);
      assert.ok(r.json.message.startsWith(field), r.text);
    }
    const hook = await createHook("https://example.com/bad-input");
    const patch = await s.call("PATCH", `/v1/orgs/${orgId}/webhooks/${hook.id}`, {
      token: owner,
      idem: idem(),
      body: { url: "javascript:alert(1)" },
    });
    assert.equal(patch.status, 400);
    assert.equal(patch.json.field, "url");
    const lim = await s.call("GET", `/v1/orgs/${orgId}/webhooks/${hook.id}/deliveries?limit=1000`, { token: owner });
    assert.equal(lim.status, 400);
    assert.equal(lim.json.field, "limit");
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}/webhooks/not-a-uuid`, { token: owner })).status, 400);
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}/webhooks/${randomUUID()}`, { token: owner })).status, 404);
    assert.equal((await s.call("GET", `/v1/orgs/${randomUUID()}/webhooks`, { token: owner })).status, 404);
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}/webhooks`)).status, 401);
    await s.call("DELETE", `/v1/orgs/${orgId}/webhooks/${hook.id}`, { token: owner, idem: idem() });
  });

  test("events from agents (internal gRPC) and identity's own are delivered, signed as standardwebhooks verifies", async () => {
    const rx = await receiver();
    try {
      const hook = await createHook(rx.url, ["session.idle", "api_key.created"]);
      const first = await publish("session.idle", { session_id: "s-1", agent_id: "a-1" });
      assert.equal(first.accepted, 1);
      // The same event id again (a relay retrying after a lost answer): nothing more is queued.
      const again = await publisher.publishWebhookEvents({
        events: [{ id: first.id, orgId, type: "session.idle", occurredAt: timestampFromDate(new Date()), data: {} }],
      });
      assert.equal(again.accepted, 0);
      // Not subscribed: queued for nobody.
      await publish("run.failed");
      // identity's own event, written with the key it reports.
      const key = await s.call("POST", "/v1/users/me/api_keys", { token: owner, idem: idem(), body: { name: "k" } });
      assert.equal(key.status, 201);
      const w = worker();
      assert.equal(await w.runOnce(), 2);
      assert.equal(rx.got.length, 2);
      const bodies = rx.got.map((r) => verify(hook.secret, r) as { type: string; data: Record<string, unknown> });
      const idle = bodies.find((b) => b.type === "session.idle");
      assert.deepEqual(idle?.data, { session_id: "s-1", agent_id: "a-1" });
      const created = bodies.find((b) => b.type === "api_key.created");
      assert.equal(created?.data.api_key_id, key.json.id);
      assert.ok(!JSON.stringify(created).includes(key.json.raw_key), "the raw key in an event");
      // A signature by another secret is refused by the same library.
      assert.throws(() => verify(`whsec_${Buffer.alloc(32, 7).toString("base64")}`, rx.got[0]!));
      assert.equal(await w.runOnce(), 0, "a succeeded delivery is not sent again");
      const log = await deliveries(hook.id);
      assert.equal(log.length, 2);
      for (const d of log) {
        assert.equal(d.status, "succeeded");
        assert.equal(d.attempts.length, 1);
        assert.equal(d.attempts[0]!.status_code, 204);
      }
    } finally {
      await rx.close();
    }
  });

  test("the internal publish RPC: only the agents certificate, known service event types, not on the REST port", async () => {
    const router = createClient(WebhookEventService, s.grpcTransport("runtime-router"));
    await assert.rejects(
      router.publishWebhookEvents({ events: [] }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.PermissionDenied,
    );
    await assert.rejects(
      publisher.publishWebhookEvents({
        events: [{ id: randomUUID(), orgId, type: "member.added", occurredAt: timestampFromDate(new Date()) }],
      }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument,
    );
    await assert.rejects(
      publisher.publishWebhookEvents({ events: [{ id: "x", orgId, type: "session.idle" }] }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.InvalidArgument,
    );
    // An organization that does not exist: dropped, not an error (its events have nowhere to go).
    const none = await publisher.publishWebhookEvents({
      events: [
        { id: randomUUID(), orgId: randomUUID(), type: "session.idle", occurredAt: timestampFromDate(new Date()) },
      ],
    });
    assert.equal(none.accepted, 0);
    const rest = await fetch(`${s.base}/identity.v1.WebhookEventService/PublishWebhookEvents`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(rest.status, 404);
  });

  test("retries: a receiver failing twice gets the delivery on the third attempt, after backoff, logged", async () => {
    const rx = await receiver({ failures: 2 });
    try {
      const hook = await createHook(rx.url);
      await publish();
      const w = worker();
      assert.equal(await w.runOnce(), 1);
      assert.equal(await w.runOnce(), 0, "not due before its backoff");
      offset += 13_000; // the first wait is 10 s ±20%
      assert.equal(await w.runOnce(), 1);
      assert.equal(await w.runOnce(), 0);
      offset += 25_000; // the second: 20 s ±20%
      assert.equal(await w.runOnce(), 1);
      offset += 30_000;
      assert.equal(await w.runOnce(), 0, "succeeded: nothing more");
      assert.deepEqual(
        rx.got.map((r) => r.status),
        [500, 500, 204],
      );
      assert.equal(new Set(rx.got.map((r) => r.headers["webhook-id"])).size, 1, "one webhook-id for every attempt");
      const [d] = await deliveries(hook.id);
      assert.equal(d!.status, "succeeded");
      assert.deepEqual(
        d!.attempts.map((a) => [a.number, a.status_code, a.response_excerpt ?? ""]),
        [
          [1, 500, "nope"],
          [2, 500, "nope"],
          [3, 204, ""],
        ],
      );
      console.log(`attempt latencies (ms): ${d!.attempts.map((a) => a.latency_ms).join(", ")}`);
    } finally {
      await rx.close();
    }
  });

  test("a restart in the middle of a retry schedule: no delivery lost, none doubled", async () => {
    const rx = await receiver({ failures: 2 });
    try {
      const hook = await createHook(rx.url);
      const ids = [await publish(), await publish()];
      assert.ok(ids.every((e) => e.accepted === 1));
      const before = worker();
      assert.equal(await before.runOnce(), 2); // both fail once (the receiver fails 2 requests)
      // The process restarts: a new app (new identity, new worker, new listeners) on the same database.
      await before.stop();
      await s.restart();
      await s.identity.webhookWorker.stop();
      publisher = createClient(WebhookEventService, s.grpcTransport("agents"));
      offset += 13_000;
      const afterRestart = worker();
      assert.equal(await afterRestart.runOnce(), 2);
      offset += 30_000;
      assert.equal(await afterRestart.runOnce(), 0);
      const ok = rx.got.filter((r) => r.status === 204).map((r) => r.headers["webhook-id"]);
      assert.equal(ok.length, 2);
      assert.equal(new Set(ok).size, 2, "each delivered once");
      const log = await deliveries(hook.id);
      assert.deepEqual(log.map((d) => [d.status, d.attempt_count]).sort(), [
        ["succeeded", 2],
        ["succeeded", 2],
      ]);
      // A process that died during an attempt (claimed, never recorded): retried once its lease ends.
      const rx2 = await receiver();
      try {
        await s.call("PATCH", `/v1/orgs/${orgId}/webhooks/${hook.id}`, {
          token: owner,
          idem: idem(),
          body: { url: rx2.url },
        });
        await publish();
        // Claimed as the dead process did: attempt_count up, next attempt pushed to the lease's end.
        const lease = new Date(Date.now() + offset + FAST.timeoutMs! + 30_000);
        await s.identity.db
          .updateTable("webhook_deliveries")
          .set((eb) => ({ attempt_count: eb("attempt_count", "+", 1), next_attempt_at: lease }))
          .where("webhook_id", "=", hook.id)
          .where("status", "=", "pending")
          .execute();
        const w = worker();
        assert.equal(await w.runOnce(), 0, "not while its lease runs");
        offset += FAST.timeoutMs! + 31_000;
        assert.equal(await w.runOnce(), 1);
        assert.equal(rx2.got.length, 1);
        verify(hook.secret, rx2.got[0]!);
      } finally {
        await rx2.close();
      }
    } finally {
      await rx.close();
    }
  });

  test("two replicas sharing the outbox: each delivery sent once", async () => {
    const rx = await receiver();
    try {
      const hook = await createHook(rx.url);
      const count = 30;
      for (let i = 0; i < count; i++) await publish();
      const a = worker({ batch: 4 });
      const b = worker({ batch: 4 });
      let attempted = 0;
      for (let round = 0; round < 50 && attempted < count; round++) {
        const [x, y] = await Promise.all([a.runOnce(), b.runOnce()]);
        attempted += x + y;
      }
      assert.equal(attempted, count);
      const ids = rx.got.map((r) => String(r.headers["webhook-id"]));
      assert.equal(ids.length, count);
      assert.equal(new Set(ids).size, count, "no delivery sent twice");
      assert.ok((await deliveries(hook.id)).every((d) => d.status === "succeeded" && d.attempt_count === 1));
    } finally {
      await rx.close();
    }
  });

  test("SSRF: loopback and private targets refused without the setting, redirects never followed", async () => {
    const rx = await receiver();
    const target = await receiver();
    const redirector = await receiver({ answer: () => [302, { location: target.url }] });
    try {
      const loop = await createHook(rx.url);
      const named = await createHook(`http://localhost:${rx.port}/hook`);
      const privateNet = await createHook("http://10.255.255.1:9/hook");
      const metadata = await createHook("http://169.254.169.254/latest/meta-data");
      const mapped = await createHook(`http://[::ffff:127.0.0.1]:${rx.port}/hook`);
      await publish();
      const strict = worker({ allowPrivateTargets: false, maxAttempts: 1 });
      assert.equal(await strict.runOnce(), 5);
      assert.equal(rx.got.length, 0, "the 127.0.0.1 receiver was contacted");
      for (const h of [loop, named, privateNet, metadata, mapped]) {
        const [d] = await deliveries(h.id);
        assert.equal(d!.status, "failed");
        assert.equal(d!.attempts[0]!.status_code, 0);
        assert.match(d!.attempts[0]!.error, /not a public address \(WEBHOOKS_ALLOW_PRIVATE_TARGETS is off\)/);
        await disable(h.id);
      }
      // With the setting on (the tests' own receivers), a 302 is a failed attempt: its Location is not followed.
      const redirect = await createHook(redirector.url);
      await publish();
      assert.equal(await worker({ maxAttempts: 1 }).runOnce(), 1);
      assert.equal(redirector.got.length, 1);
      assert.equal(target.got.length, 0, "the redirect was followed");
      const [d] = await deliveries(redirect.id);
      assert.equal(d!.status, "failed");
      assert.equal(d!.attempts[0]!.status_code, 302);
    } finally {
      await Promise.all([rx.close(), target.close(), redirector.close()]);
    }
  });

  test("a slow receiver times out (a failed attempt, no status)", async () => {
    const slow = createServer(() => {}); // never answers
    await new Promise<void>((r) => slow.listen(0, "127.0.0.1", r));
    try {
      const hook = await createHook(`http://127.0.0.1:${(slow.address() as AddressInfo).port}/`);
      await publish();
      assert.equal(await worker({ timeoutMs: 300, maxAttempts: 1 }).runOnce(), 1);
      const [d] = await deliveries(hook.id);
      assert.equal(d!.attempts[0]!.status_code, 0);
      assert.match(d!.attempts[0]!.error, /timed out after 300 ms/);
    } finally {
      slow.closeAllConnections();
      await new Promise<void>((r) => slow.close(() => r()));
    }
  });

  test("rotation: both secrets sign during the overlap; each verifies with standardwebhooks; afterwards only the new", async () => {
    const rx = await receiver();
    try {
      const hook = await createHook(rx.url);
      const rot = await s.call("POST", `/v1/orgs/${orgId}/webhooks/${hook.id}/rotate-secret`, {
        token: owner,
        idem: idem(),
      });
      const fresh = rot.json.secret as string;
      await publish();
      await worker().runOnce();
      const first = rx.got[0]!;
      assert.equal(String(first.headers["webhook-signature"]).split(" ").length, 2);
      verify(hook.secret, first);
      verify(fresh, first);
      // Past the overlap (24 h by default), the old secret no longer signs. The clock jumps a day, so the
      // library's timestamp tolerance is out of play: check signature counts, then verify with ours.
      const later = new Date(Date.parse(rot.json.webhook.previous_secret_expires_at) + 1000);
      await publish();
      await s.identity.newWebhookWorker({ clock: () => later, settings: FAST }).runOnce();
      const second = rx.got[1]!;
      assert.equal(String(second.headers["webhook-signature"]).split(" ").length, 1);
      const { hasValidSignature } = await import("./signing.ts");
      const sig = (secret: string) =>
        hasValidSignature(
          secret,
          String(second.headers["webhook-signature"]),
          String(second.headers["webhook-id"]),
          Number(second.headers["webhook-timestamp"]),
          second.body,
        );
      assert.equal(sig(fresh), true);
      assert.equal(sig(hook.secret), false);
    } finally {
      await rx.close();
    }
  });

  test("a long failure streak disables the endpoint, with an audit entry; redelivery sends the same message again", async () => {
    const rx = await receiver({ failures: 1000 });
    try {
      const hook = await createHook(rx.url);
      for (let i = 0; i < 3; i++) await publish();
      const w = worker({ maxAttempts: 1, disableAfterFailures: 3 });
      assert.equal(await w.runOnce(), 3);
      const got = await s.call("GET", `/v1/orgs/${orgId}/webhooks/${hook.id}`, { token: owner });
      assert.equal(got.json.enabled, false);
      assert.equal(got.json.failure_streak, 3);
      assert.match(got.json.disabled_reason, /3 failed attempts in a row/);
      const audit = await s.call("GET", `/v1/orgs/${orgId}/audit_events?action=webhook.disabled`, { token: owner });
      assert.ok(
        audit.json.items.some((e: { target_id: string }) => e.target_id === hook.id),
        audit.text,
      );
      // Disabled: new events are not queued for it, and nothing is sent.
      await publish();
      assert.equal(await w.runOnce(), 0);
      assert.equal((await deliveries(hook.id)).length, 3);
      // Enabled again by the owner; one failed delivery redelivered by hand reaches the (now healthy) receiver.
      rx.failures = 0;
      const en = await s.call("PATCH", `/v1/orgs/${orgId}/webhooks/${hook.id}`, {
        token: owner,
        idem: idem(),
        body: { enabled: true },
      });
      assert.equal(en.json.failure_streak, 0);
      const target = (await deliveries(hook.id))[0]!;
      const re = await s.call("POST", `/v1/orgs/${orgId}/webhooks/${hook.id}/deliveries/${target.id}/redeliver`, {
        token: owner,
        idem: idem(),
      });
      assert.equal(re.status, 202, re.text);
      assert.equal(re.json.status, "pending");
      assert.equal(await w.runOnce(), 1);
      const last = rx.got[rx.got.length - 1]!;
      assert.equal(last.status, 204);
      assert.equal(last.headers["webhook-id"], target.id);
      verify(hook.secret, last);
      const after = (await deliveries(hook.id)).find((d) => d.id === target.id)!;
      assert.equal(after.status, "succeeded");
      assert.equal(after.attempts.length, 2);
      const bad = await s.call("POST", `/v1/orgs/${orgId}/webhooks/${hook.id}/deliveries/${randomUUID()}/redeliver`, {
        token: owner,
        idem: idem(),
      });
      assert.equal(bad.status, 404);
    } finally {
      await rx.close();
    }
  });

  test("member.added: an accepted invitation is delivered", async () => {
    const rx = await receiver();
    try {
      const hook = await createHook(rx.url, ["member.added"]);
      const email = `hook-member-${process.pid}-${n++}@example.com`;
      const inv = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
        token: owner,
        idem: idem(),
        body: { email, role: "member" },
      });
      const acc = await s.call("POST", "/v1/invitations/accept", {
        body: { token: inv.json.token, password: "person-password-1" },
      });
      assert.equal(acc.status, 200, acc.text);
      assert.equal(await worker().runOnce(), 1);
      const body = verify(hook.secret, rx.got[0]!) as { type: string; data: Record<string, unknown> };
      assert.equal(body.type, "member.added");
      assert.equal(body.data.email, email);
      assert.equal(body.data.role, "member");
    } finally {
      await rx.close();
    }
  });
});
