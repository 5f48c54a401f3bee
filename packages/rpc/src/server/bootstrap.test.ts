import assert from "node:assert/strict";
import * as net from "node:net";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient, type ServiceImpl } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import { createServiceTransport } from "../client.ts";
import { requestInfo } from "../context.ts";
import { createProbe, libraryImpl, testServer } from "../testing/fixture.ts";
import { createServer } from "./create-server.ts";

describe("REQUEST_TIMEOUT", () => {
  const { server, probe } = testServer({ requestTimeoutMs: 150 });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("a REST call past the deadline → 504 deadline_exceeded and the handler is cancelled", async () => {
    const aborted = probe.nextAbort();
    const r = await fetch(`${url}/v1/sleep?ms=10000`);
    assert.equal(r.status, 504);
    assert.equal(((await r.json()) as { error: { code: string } }).error.code, "deadline_exceeded");
    assert.equal(await aborted, "sleep");
  });

  test("a gRPC call without its own deadline gets REQUEST_TIMEOUT", async () => {
    const c = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    await assert.rejects(c.sleep({ ms: 10000n }), (e) => e instanceof ConnectError && e.code === Code.DeadlineExceeded);
  });

  test("calls within the deadline succeed", async () => {
    const r = await fetch(`${url}/v1/sleep?ms=10`);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), {});
  });
});

describe("client disconnect", () => {
  const { server, probe } = testServer({ requestTimeoutMs: 60_000 });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("a REST client that goes away cancels a unary handler", async () => {
    const aborted = probe.nextAbort();
    const abort = new AbortController();
    const pending = fetch(`${url}/v1/sleep?ms=20000`, { signal: abort.signal }).catch(() => "aborted");
    // The client goes away once its call is running (a fixed delay raced the
    // request on a loaded machine: aborted before it was sent, no handler ran).
    const deadline = Date.now() + 30_000;
    while (!probe.calls.get("sleep") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    abort.abort();
    assert.equal(await pending, "aborted");
    const timer = new Promise((r) => setTimeout(() => r("handler not cancelled"), 5000).unref());
    assert.equal(await Promise.race([aborted, timer]), "sleep");
  });
});

describe("READ_HEADER_TIMEOUT", () => {
  const { server } = testServer({ readHeaderTimeoutMs: 200 });
  let port = 0;
  before(async () => {
    ({ port } = await server.listen());
  });
  after(() => server.close());

  const closedWithin = (send: string | undefined, ms: number) =>
    new Promise<{ closed: boolean; data: string }>((resolve) => {
      const s = net.connect(port, "127.0.0.1", () => {
        if (send !== undefined) s.write(send);
      });
      let data = "";
      s.on("data", (d) => (data += d));
      const t = setTimeout(() => {
        s.destroy();
        resolve({ closed: false, data });
      }, ms);
      s.on("close", () => {
        clearTimeout(t);
        resolve({ closed: true, data });
      });
      s.on("error", () => {});
    });

  test("a silent connection is closed", async () => {
    assert.equal((await closedWithin(undefined, 3000)).closed, true);
  });

  test("an HTTP/2 connection that opens no stream is closed", async () => {
    const r = await closedWithin("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 3000);
    assert.equal(r.closed, true);
  });

  test("a request whose headers never finish is closed", async () => {
    const r = await closedWithin("GET /livez HTTP/1.1\r\nHost: x\r\n", 4000);
    assert.equal(r.closed, true);
    assert.ok(!r.data.includes("200 OK"));
  });
});

// The first bytes of a plaintext connection tell HTTP/1.1 from h2c; they may arrive in pieces.
describe("protocol sniffing", () => {
  const { server } = testServer({});
  let port = 0;
  before(async () => {
    ({ port } = await server.listen());
  });
  after(() => server.close());

  /** Writes `pieces` 20 ms apart and resolves with the first bytes that come back. */
  const answerTo = (pieces: (string | Buffer)[]) =>
    new Promise<Buffer>((resolve, reject) => {
      const s = net.connect(port, "127.0.0.1", async () => {
        for (const piece of pieces) {
          s.write(piece);
          await new Promise((r) => setTimeout(r, 20));
        }
      });
      s.once("data", (d: Buffer) => {
        s.destroy();
        resolve(d);
      });
      s.on("error", reject);
    });

  test("an HTTP/1.1 request sent a byte at a time (its first byte also begins the HTTP/2 preface)", async () => {
    const answer = await answerTo([..."GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"]);
    assert.match(answer.toString(), /^HTTP\/1\.1 200 /);
  });

  test("an HTTP/1.1 request whose first piece holds the whole request", async () => {
    const answer = await answerTo(["GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"]);
    assert.match(answer.toString(), /^HTTP\/1\.1 200 /);
  });

  test("an HTTP/2 preface in pieces gets the server's SETTINGS frame", async () => {
    // An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
    const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
    const answer = await answerTo(["PRI * HTTP/2.0\r\n", "\r\nSM", "\r\n\r\n", settings]);
    assert.equal(answer[3], 4, "the first frame is SETTINGS");
  });
});

describe("slow request bodies", () => {
  const { server } = testServer({ readHeaderTimeoutMs: 200, requestTimeoutMs: 400 });
  let port = 0;
  before(async () => {
    ({ port } = await server.listen());
  });
  after(() => server.close());

  test("a body trickled past REQUEST_TIMEOUT ends the connection", async () => {
    const started = Date.now();
    const result = await new Promise<{ closed: boolean; data: string }>((resolve) => {
      const s = net.connect(port, "127.0.0.1", () => {
        s.write("POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
      });
      let data = "";
      s.on("data", (d) => (data += d));
      s.on("error", () => {});
      const t = setTimeout(() => {
        s.destroy();
        resolve({ closed: false, data });
      }, 5000);
      s.on("close", () => {
        clearTimeout(t);
        resolve({ closed: true, data });
      });
    });
    assert.equal(result.closed, true);
    assert.ok(!result.data.includes("200 OK"));
    assert.ok(Date.now() - started < 5000);
  });
});

describe("request and trace ids", () => {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) });
  // Downstream service: reports the ids it received.
  const downstream = testServer();
  // Upstream: its Echo calls downstream's Echo through createServiceTransport.
  let downstreamUrl = "";
  const upstreamImpl: ServiceImpl<typeof LibraryService> = {
    ...libraryImpl(createProbe()),
    async echo(req, ctx) {
      const c = createClient(LibraryService, createServiceTransport({ baseUrl: downstreamUrl }));
      const down = await c.echo({ text: req.text });
      return { text: down.text, headers: down.headers, requestId: requestInfo(ctx)?.requestId ?? "" };
    },
  };
  const upstream = createServer({
    name: "upstream",
    envelope: "agents",
    logger,
    services: [
      {
        service: LibraryService,
        impl: upstreamImpl,
      },
    ],
  });
  let url = "";
  before(async () => {
    downstreamUrl = (await downstream.server.listen()).url;
    url = (await upstream.listen()).url;
  });
  after(async () => {
    await upstream.close();
    await downstream.server.close();
  });

  test("ids are accepted, returned, and propagated to outgoing gRPC calls", async () => {
    const r = await fetch(`${url}/v1/echo`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "rid-1", "x-trace-id": "tid-1" },
      body: JSON.stringify({ text: "x" }),
    });
    assert.equal(r.headers.get("x-request-id"), "rid-1");
    const body = (await r.json()) as { headers: Record<string, string>; requestId: string };
    assert.equal(body.requestId, "rid-1");
    assert.equal(body.headers["x-request-id"], "rid-1");
    assert.equal(body.headers["x-trace-id"], "tid-1");
  });

  test("ids are generated when absent, also for gRPC calls", async () => {
    let header: Headers | undefined;
    const c = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    const res = await c.getShelf({ shelf: 1n }, { onHeader: (h) => (header = h) });
    assert.equal(res.shelf, 1n);
    assert.match(header!.get("x-request-id")!, /^[0-9a-f-]{36}$/);
    assert.match(header!.get("x-trace-id")!, /^[0-9a-f]{32}$/);
  });

  test("one JSON log line per request with the request id", async () => {
    await fetch(`${url}/v1/shelves/3`, { headers: { "x-request-id": "log-me" } });
    await new Promise((r) => setTimeout(r, 20));
    const line = lines.find((l) => l.requestId === "log-me" && l.msg === "request");
    assert.ok(line, JSON.stringify(lines.slice(-3)));
    assert.equal(line.status, 200);
    assert.equal(line.path, "/v1/shelves/3");
    assert.equal(typeof line.traceId, "string");
  });
});

describe("second port", () => {
  const { server } = testServer({ grpcPort: 0 });
  after(() => server.close());
  test("grpcPort serves gRPC and REST like the main port", async () => {
    const { grpcPort, port } = await server.listen();
    assert.ok(grpcPort && grpcPort !== port);
    const c = createClient(LibraryService, createGrpcTransport({ baseUrl: `http://127.0.0.1:${grpcPort}` }));
    assert.equal((await c.getShelf({ shelf: 2n })).name, "shelf 2");
    assert.equal((await fetch(`http://127.0.0.1:${grpcPort}/v1/shelves/2`)).status, 200);
  });
});

describe("graceful shutdown", () => {
  test("in-flight unary calls finish; new connections are refused", async () => {
    const { server, probe } = testServer({ shutdownTimeoutMs: 5000 });
    const { url, port } = await server.listen();
    const inflight = fetch(`${url}/v1/sleep?ms=300`);
    // Closes once the call is running (a fixed delay raced the request on a loaded machine).
    const deadline = Date.now() + 30_000;
    while (!probe.calls.get("sleep") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const closed = server.close();
    const r = await inflight;
    assert.equal(r.status, 200);
    await closed;
    await assert.rejects(
      new Promise((resolve, reject) => {
        const s = net.connect(port, "127.0.0.1", () => resolve(s));
        s.on("error", reject);
      }),
    );
  });

  test("a stream past SHUTDOWN_TIMEOUT is cancelled cleanly: handler aborted, response ended", async () => {
    const { server, probe } = testServer({ shutdownTimeoutMs: 200 });
    const { url } = await server.listen();
    const res = await fetch(`${url}/v1/ticks?hang=true&interval_ms=20`);
    const reader = res.body!.getReader();
    await reader.read();
    const aborted = probe.nextAbort();
    const started = Date.now();
    await server.close();
    assert.equal(await aborted, "tick");
    assert.ok(Date.now() - started < 3000);
    // The stream ends (done) rather than breaking mid-event.
    let done = false;
    let tail = "";
    while (!done) {
      const chunk = await reader.read().catch(() => ({ done: true, value: undefined }));
      done = chunk.done;
      if (chunk.value) tail += new TextDecoder().decode(chunk.value);
    }
    assert.ok(tail === "" || tail.endsWith("\n\n"), JSON.stringify(tail));
  });

  test("gRPC streams over h2 are cancelled at the deadline too", async () => {
    const { server, probe } = testServer({ shutdownTimeoutMs: 200 });
    const { url } = await server.listen();
    const c = createClient(
      (await import("@platform/gen/rpctest/v1/rpctest_pb")).StreamService,
      createGrpcTransport({ baseUrl: url }),
    );
    const it = c.tick({ hang: true, intervalMs: 20 })[Symbol.asyncIterator]();
    await it.next();
    const aborted = probe.nextAbort();
    await server.close();
    assert.equal(await aborted, "tick");
    await it.return?.().catch(() => {});
  });
});
