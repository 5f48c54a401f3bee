// The REST transport against small local HTTP servers: the 401 retry with a
// renewed credential (same Idempotency-Key), deadlines and cancellation.
import assert from "node:assert/strict";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { after, test } from "node:test";
import { Code, PlatformClient, PlatformError } from "../index.ts";

const servers: http.Server[] = [];
after(() => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
});

async function serve(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function jwt(exp: number, n: number): string {
  const b = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  return `${b({ alg: "RS256" })}.${b({ exp, n })}.sig`;
}

test("a 401 is answered by one refresh and the call is sent again, with the same Idempotency-Key", async () => {
  const inHour = Math.floor(Date.now() / 1000) + 3600;
  const seen: Array<{ path: string; auth?: string; key?: string }> = [];
  const url = await serve((req, res) => {
    seen.push({
      path: req.url ?? "",
      auth: req.headers.authorization,
      key: req.headers["idempotency-key"] as string | undefined,
    });
    res.setHeader("content-type", "application/json");
    if (req.url === "/v1/auth/refresh") {
      res.end(
        JSON.stringify({ access_token: jwt(inHour, 2), refresh_token: "rt_2", token_type: "Bearer", expires_in: 3600 }),
      );
    } else if (req.headers.authorization === `Bearer ${jwt(inHour, 1)}`) {
      res.statusCode = 401;
      res.end(JSON.stringify({ error: { code: "unauthenticated", message: "token revoked" } }));
    } else {
      res.statusCode = 201;
      res.end(JSON.stringify({ id: "a1", name: "n", slug: "s", model: "dev/echo" }));
    }
  });
  const c = new PlatformClient({
    identity: url,
    agents: url,
    tokens: { accessToken: jwt(inHour, 1), refreshToken: "rt_1", expiresAt: inHour * 1000 },
  });
  const agent = await c.agents.create({ name: "n", slug: "s", model: "dev/echo" });
  assert.equal(agent.id, "a1");
  assert.deepEqual(
    seen.map((s) => s.path),
    ["/v1/agents", "/v1/auth/refresh", "/v1/agents"],
  );
  assert.equal(seen[2]!.auth, `Bearer ${jwt(inHour, 2)}`);
  assert.ok(seen[0]!.key);
  assert.equal(seen[2]!.key, seen[0]!.key, "one Idempotency-Key for the call");
  assert.equal(seen[1]!.auth, undefined, "refresh goes without a credential");
  assert.equal(c.tokens?.refreshToken, "rt_2");
});

test("a unary call past its deadline is DEADLINE_EXCEEDED; an aborted stream is CANCELED", async () => {
  const url = await serve(() => {
    // Never answers.
  });
  const c = new PlatformClient({ identity: url, agents: url, timeoutMs: 200, apiKey: "sk_test_x" });
  const started = Date.now();
  const late = await c.agents.list().catch((e: unknown) => e);
  assert.ok(late instanceof PlatformError);
  assert.equal(late.code, Code.DeadlineExceeded);
  assert.ok(Date.now() - started < 5_000);
  const abort = new AbortController();
  setTimeout(() => abort.abort(), 100);
  const cancelled = await (async () => {
    for await (const _ of c.sessions.send("00000000-0000-0000-0000-000000000000", "hi", { signal: abort.signal })) {
      // nothing comes
    }
  })().catch((e: unknown) => e);
  assert.ok(cancelled instanceof PlatformError);
  assert.equal(cancelled.code, Code.Canceled);
});

test("a stream that breaks is rejoined with Last-Event-ID, an event sent again is skipped; every header passes CORS", async () => {
  const { CORS_ALLOW_HEADERS } = await import("../../../rpc/src/server/cors.ts");
  const sid = "11111111-1111-1111-1111-111111111111";
  const requests: Array<{ line: string; headers: http.IncomingHttpHeaders }> = [];
  const url = await serve((req, res) => {
    requests.push({ line: `${req.method} ${req.url}`, headers: req.headers });
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (req.method === "POST") {
      res.write(': ping\n\nid: 5\ndata: {"type":"text","content":"a"}\n\n');
      // The connection drops mid-run.
      setTimeout(() => res.destroy(), 20);
    } else {
      // A replay that overlaps what the client has (a server or proxy may): seq 5 again.
      res.end(
        'id: 5\ndata: {"type":"text","content":"a"}\n\n' +
          'id: 6\ndata: {"type":"text","content":"b"}\n\n' +
          'id: 7\ndata: {"type":"done","tokensIn":1,"tokensOut":2}\n\n',
      );
    }
  });
  const c = new PlatformClient({ identity: url, agents: url, apiKey: "sk_test_x", resume: { delayMs: 10 } });
  const got = [];
  for await (const e of c.sessions.send(sid, "hi")) got.push(e);
  assert.deepEqual(got, [
    { type: "text", seq: 5, content: "a" },
    { type: "text", seq: 6, content: "b" },
    { type: "done", seq: 7, tokensIn: 1, tokensOut: 2 },
  ]);
  assert.deepEqual(
    requests.map((r) => r.line),
    [`POST /v1/sessions/${sid}/messages`, `GET /v1/sessions/${sid}/events`],
  );
  assert.equal(requests[1]!.headers["last-event-id"], "5");
  // What a browser may send cross-origin: the services' allow-list, plus the safelisted and forbidden ones it sets itself.
  const browserOwn = new Set(["accept", "host", "connection", "content-length", "accept-encoding", "accept-language"]);
  const odd = new Set<string>();
  for (const r of requests)
    for (const name of Object.keys(r.headers))
      if (
        !CORS_ALLOW_HEADERS.includes(name) &&
        !browserOwn.has(name) &&
        !name.startsWith("sec-fetch-") &&
        name !== "user-agent"
      )
        odd.add(name);
  assert.deepEqual([...odd], []);
});
