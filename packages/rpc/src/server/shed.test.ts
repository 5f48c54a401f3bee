import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { pino } from "pino";
import { currentRequest } from "../context.ts";
import { testServer } from "../testing/fixture.ts";
import { REFUSALS_LOG_MS } from "./requests.ts";

// ServerOptions.shed: a refusal before routing answers exactly what the
// handler raising the same error would, runs no handler, never touches the
// health endpoints or procedure paths, and leaves a kept-alive connection usable.
describe("shed: refusing a request before it is routed", () => {
  const busy = new PlatformError(Code.Unavailable, "busy", "too busy; retry shortly", { retry_after: "3" });
  let shedding = true;
  const seen: string[] = [];
  const { server } = testServer({
    restOnly: true,
    shed: (req, path) => {
      seen.push(`${req.method} ${path}`);
      return shedding && path !== "/v1/fail" ? busy : undefined;
    },
  });
  let base = "";
  before(async () => {
    base = (await server.listen()).url;
  });
  after(() => server.close());

  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  test("the same status, body and Retry-After as the handler's own refusal, and no handler runs", async () => {
    const early = await post("/v1/echo", { text: "x" });
    // The same error raised by a handler (the fixture's Fail throws what it is told).
    const late = await post("/v1/fail", {
      code: "unavailable",
      reason: "busy",
      message: "too busy; retry shortly",
      extra: { retry_after: "3" },
    });
    assert.equal(early.status, 503);
    assert.equal(early.status, late.status);
    assert.equal(early.headers.get("retry-after"), "3");
    assert.equal(early.headers.get("retry-after"), late.headers.get("retry-after"));
    assert.deepEqual(await early.json(), await late.json());
    assert.ok(early.headers.get("x-request-id"), "a refusal still carries its request id");
  });

  test("health endpoints are never offered to it; without a refusal the request is served", async () => {
    seen.length = 0;
    assert.equal((await fetch(`${base}/livez`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    assert.deepEqual(seen, []);
    shedding = false;
    try {
      const r = await post("/v1/echo", { text: "hi" });
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as { text: string }).text, "hi");
    } finally {
      shedding = true;
    }
  });

  test("a kept-alive connection carries the next request after a refusal whose body was never read", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    after(() => agent.destroy());
    const once = (text: string) =>
      new Promise<{ status: number; body: string; reused: boolean }>((resolve, reject) => {
        const body = JSON.stringify({ text: text.repeat(50_000) });
        const req = http.request(
          `${base}/v1/echo`,
          { method: "POST", agent, headers: { "content-type": "application/json", "content-length": body.length } },
          (res) => {
            let got = "";
            res.on("data", (c: Buffer) => (got += c.toString()));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: got, reused: req.reusedSocket }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    assert.equal((await once("a")).status, 503);
    shedding = false;
    try {
      const next = await once("b");
      assert.equal(next.status, 200);
      assert.equal(next.reused, true);
    } finally {
      shedding = true;
    }
  });
});

// Issue 15 item 4: a storm's refusals are answered as the request enters,
// before its RequestInfo, async context, trace context or access log line
// are made (each refused login cost the loop ~0.68 ms before), with the same
// answer; a request with an Origin still passes CORS first.
describe("shed: a refusal as the request enters", () => {
  const busy = new PlatformError(Code.Unavailable, "busy", "too busy; retry shortly", { retry_after: "2" });
  const lines: { msg: string; count?: number; maxMs?: number; status?: number; path?: string }[] = [];
  const contexts: (string | undefined)[] = [];
  const { server } = testServer({
    restOnly: true,
    cors: { allowedOrigins: ["https://console.example.com"] },
    logger: pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s)) }),
    shed: (_req, path) => {
      contexts.push(currentRequest()?.requestId);
      return path === "/v1/echo" ? busy : undefined;
    },
  });
  let base = "";
  before(async () => {
    base = (await server.listen()).url;
  });
  after(() => server.close());

  test("answered before the body arrives, outside any request context, with the envelope, Retry-After and ids", async () => {
    const url = new URL(base);
    // Headers that announce a body which never comes: only an answer that reads no body can come back.
    const answer = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>(
      (resolve, reject) => {
        const req = http.request(
          {
            host: url.hostname,
            port: url.port,
            method: "POST",
            path: "/v1/echo",
            headers: { "content-type": "application/json", "content-length": "100", "x-request-id": "storm-1" },
          },
          (res) => {
            let body = "";
            res.on("data", (c: Buffer) => (body += c.toString()));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
          },
        );
        req.on("error", reject);
        req.flushHeaders();
        setTimeout(() => req.destroy(), 5000).unref();
      },
    );
    assert.equal(answer.status, 503);
    assert.equal(answer.headers["retry-after"], "2");
    assert.equal(answer.headers["content-type"], "application/json");
    assert.equal(answer.headers["x-request-id"], "storm-1");
    assert.match(String(answer.headers["x-trace-id"]), /^[0-9a-f]{32}$/);
    assert.deepEqual(JSON.parse(answer.body), { error: { code: "unavailable", message: "too busy; retry shortly" } });
    assert.deepEqual(contexts, [undefined], "decided before the request's context exists");
    // The same error through CORS and dispatch (a browser's request): the same answer, CORS headers on it.
    const late = await fetch(`${base}/v1/echo`, {
      method: "POST",
      headers: { origin: "https://console.example.com", "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(late.status, 503);
    assert.equal(late.headers.get("retry-after"), "2");
    assert.equal(late.headers.get("access-control-allow-origin"), "https://console.example.com");
    assert.deepEqual(await late.json(), JSON.parse(answer.body));
    assert.equal(contexts.length, 2);
    assert.ok(contexts[1], "with an Origin it is asked inside the request's context, after CORS");
  });

  test("refusals are logged as a count per path and status, not a line each", async () => {
    // The previous test's refusal is counted in a line of its own first.
    await new Promise((r) => setTimeout(r, REFUSALS_LOG_MS + 200));
    lines.length = 0;
    for (let i = 0; i < 5; i++) {
      const r = await fetch(`${base}/v1/echo`, { method: "POST", body: "{}" });
      assert.equal(r.status, 503);
      await r.arrayBuffer();
    }
    await new Promise((r) => setTimeout(r, REFUSALS_LOG_MS + 200));
    const counted = lines.filter((l) => l.msg === "requests refused before routing");
    assert.deepEqual(
      counted.map((l) => [l.path, l.status, l.count]),
      [["/v1/echo", 503, 5]],
    );
    assert.ok(typeof counted[0]!.maxMs === "number");
    assert.equal(lines.filter((l) => l.msg === "request").length, 0);
  });
});
