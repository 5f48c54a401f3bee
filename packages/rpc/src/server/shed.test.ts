import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
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
    // A new connection's refused first request ends it (the next describe): this one is served first.
    shedding = false;
    try {
      assert.equal((await once("a")).status, 200);
      shedding = true;
      const refused = await once("b");
      assert.equal(refused.status, 503);
      assert.equal(refused.reused, true);
      shedding = false;
      const next = await once("c");
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

// Issue 15 item 4: a new connection whose first request is refused is
// answered from its first bytes, before an HTTP parser, request or response
// object is made for it (requests.ts refuseFirst): the same answer with
// `connection: close`, read whole by the client even when the body it sent
// is large and never read, and counted in the metrics and the log.
describe("shed: a new connection's first request refused from its bytes", () => {
  const busy = new PlatformError(Code.Unavailable, "busy", "too busy; retry shortly", { retry_after: "4" });
  const heads: { method?: string; url?: string; host?: unknown }[] = [];
  const { server } = testServer({
    restOnly: true,
    shed: (req, path) => {
      heads.push({ method: req.method, url: req.url, host: req.headers.host });
      return path === "/v1/echo" ? busy : undefined;
    },
  });
  let port = 0;
  before(async () => {
    port = (await server.listen()).port;
  });
  after(() => server.close());

  /** Writes `parts` on a new connection (a pause between them) and reads until the server closes it. */
  const raw = (parts: string[], pauseMs = 0) =>
    new Promise<{ text: string; error?: string }>((resolve) => {
      const socket = net.connect(port, "127.0.0.1");
      let text = "";
      socket.on("data", (c: Buffer) => (text += c.toString("latin1")));
      socket.on("error", (err: NodeJS.ErrnoException) => resolve({ text, error: err.code }));
      socket.on("close", () => resolve({ text }));
      socket.on("connect", async () => {
        for (const p of parts) {
          if (socket.destroyed) return;
          socket.write(p);
          if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
        }
        // The client's own end: the server ends after its answer; this lets the socket close.
        if (!socket.destroyed) socket.end();
      });
      setTimeout(() => socket.destroy(), 10_000).unref();
    });
  const parse = (text: string) => {
    const [head, body] = [text.slice(0, text.indexOf("\r\n\r\n")), text.slice(text.indexOf("\r\n\r\n") + 4)];
    const [status, ...fields] = head.split("\r\n");
    const headers = Object.fromEntries(
      fields.map((f) => [f.slice(0, f.indexOf(":")).toLowerCase(), f.slice(f.indexOf(":") + 1).trim()]),
    );
    return { status, headers, body };
  };
  const requestCount = () => {
    const c = server.metrics.registry.getSingleMetric("platform_http_requests_total") as unknown as {
      get(): Promise<{ values: { labels: Record<string, string>; value: number }[] }>;
    };
    return c
      .get()
      .then((m) =>
        m.values
          .filter((v) => v.labels.route === "/v1/echo" && v.labels.code === "503")
          .reduce((n, v) => n + v.value, 0),
      );
  };

  test("answered whole with connection: close, the envelope, Retry-After and ids, the large body unread", async () => {
    const before = await requestCount();
    heads.length = 0;
    const body = JSON.stringify({ text: "x".repeat(300_000) });
    const head = `POST /v1/echo?x=1 HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nX-Request-Id: first-1\r\n\r\n`;
    // The head and a first piece together, the rest of the body in pieces after the answer left.
    const pieces = [head + body.slice(0, 1000)];
    for (let i = 1000; i < body.length; i += 50_000) pieces.push(body.slice(i, i + 50_000));
    const got = await raw(pieces, 5);
    assert.equal(got.error, undefined, "the connection was not reset");
    const answer = parse(got.text);
    assert.equal(answer.status, "HTTP/1.1 503 Service Unavailable");
    assert.equal(answer.headers.connection, "close", "answered from the first bytes, not by the HTTP parser");
    assert.equal(answer.headers["retry-after"], "4");
    assert.equal(answer.headers["content-type"], "application/json");
    assert.equal(answer.headers["x-request-id"], "first-1");
    assert.match(answer.headers["x-trace-id"]!, /^[0-9a-f]{32}$/);
    assert.ok(!Number.isNaN(Date.parse(answer.headers.date!)));
    assert.equal(Number(answer.headers["content-length"]), Buffer.byteLength(answer.body));
    assert.deepEqual(JSON.parse(answer.body), { error: { code: "unavailable", message: "too busy; retry shortly" } });
    assert.deepEqual(heads, [{ method: "POST", url: "/v1/echo?x=1", host: `127.0.0.1:${port}` }]);
    assert.equal((await requestCount()) - before, 1, "counted in the HTTP metrics");
  });

  test("the same answer as a refusal on a kept-alive connection", async () => {
    const request = `POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}`;
    const first = parse((await raw([request])).text);
    // The same request as a connection's second: refused by the request entry, the connection kept.
    const second = await raw([`GET /v1/echo/none HTTP/1.1\r\nHost: x\r\n\r\n${request}`]);
    const later = parse(got2(second.text));
    assert.equal(later.headers.connection, "keep-alive");
    assert.equal(first.status, later.status);
    assert.equal(first.body, later.body);
    for (const h of ["content-type", "content-length", "retry-after"]) assert.equal(first.headers[h], later.headers[h]);
  });
  /** The second answer of a connection's text (the first has a body of its Content-Length). */
  const got2 = (text: string) => {
    const first = parse(text);
    const firstLength = text.indexOf("\r\n\r\n") + 4 + Number(first.headers["content-length"]);
    return text.slice(firstLength);
  };

  test("a head not whole in the first bytes, or with an Origin, goes the HTTP parser's way", async () => {
    const split = await raw([`POST /v1/echo HTTP/1.1\r\nHost: x\r\n`, `Content-Length: 2\r\n\r\n{}`], 30);
    const a = parse(split.text);
    assert.equal(a.status, "HTTP/1.1 503 Service Unavailable");
    assert.equal(a.headers.connection, "keep-alive");
    const origin = parse(
      (
        await raw([
          `POST /v1/echo HTTP/1.1\r\nHost: x\r\nOrigin: https://elsewhere.example\r\nContent-Length: 2\r\n\r\n{}`,
        ])
      ).text,
    );
    // Refused after CORS (dispatch's shed step), on a connection that stays open.
    assert.equal(origin.status, "HTTP/1.1 503 Service Unavailable");
    assert.equal(origin.headers.connection, "keep-alive");
    // A request it does not refuse is served as ever.
    const served = parse((await raw([`GET /livez HTTP/1.1\r\nHost: x\r\n\r\n`])).text);
    assert.equal(served.status, "HTTP/1.1 200 OK");
  });
});
