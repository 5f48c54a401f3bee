import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { PlatformError } from "@platform/errors";
import { LibraryService, StreamService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { fromConnectError } from "../errors.ts";
import { identityLikeEnvelope, testServer } from "../testing/fixture.ts";
import { messageToJson } from "../transcode/json.ts";

// Runs for every call, REST included: the REST path goes through the same
// Connect handlers.
const seen: string[] = [];
const gate: Interceptor = (next) => async (req) => {
  seen.push(`${req.method.name}:${req.header.get("x-probe") ?? ""}`);
  if (req.header.get("x-deny") === "yes") throw PlatformError.permissionDenied("denied by interceptor", "gate_closed");
  return next(req);
};

describe("REST and gRPC give the same results and errors", () => {
  const { server } = testServer({ envelope: identityLikeEnvelope, interceptors: [gate] });
  let url = "";
  let grpc: ReturnType<typeof createClient<typeof LibraryService>>;
  before(async () => {
    url = (await server.listen()).url;
    grpc = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
  });
  after(() => server.close());

  const rest = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const r = await fetch(url + path, {
      method,
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: { "content-type": "application/json", ...headers },
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

  test("same result", async () => {
    const viaRest = await rest("GET", "/v1/shelves/77");
    const viaGrpc = await grpc.getShelf({ shelf: 77n });
    assert.equal(viaRest.status, 200);
    assert.deepEqual(viaRest.body, messageToJson(LibraryService.method.getShelf.output, viaGrpc));
    const restBook = await rest("GET", "/v1/shelves/1/books/9");
    const grpcBook = await grpc.getBook({ name: "shelves/1/books/9" });
    assert.deepEqual(
      restBook.body,
      (messageToJson(LibraryService.method.getBook.output, grpcBook) as { book: unknown }).book,
    );
  });

  test("same domain error", async () => {
    const req = {
      code: "failed_precondition",
      reason: "sandbox_not_runnable",
      message: "sandbox is FAILED",
      extra: { state: "FAILED" },
    };
    const viaRest = await rest("POST", "/v1/fail", req);
    const viaGrpc = await grpc.fail(req).then(
      () => assert.fail("expected an error"),
      (e) => fromConnectError(e),
    );
    assert.equal(viaRest.status, 400);
    assert.deepEqual(viaRest.body, { code: viaGrpc.reason, message: viaGrpc.message, ...viaGrpc.extra });
    assert.equal(viaGrpc.codeName, "failed_precondition");
    assert.deepEqual(viaGrpc.extra, { state: "FAILED" });
  });

  test("httpStatus override survives gRPC (ErrorInfo metadata)", async () => {
    const req = { code: "invalid_argument", reason: "idempotency_key_mismatch", message: "m", httpStatus: 422 };
    const viaRest = await rest("POST", "/v1/fail", req);
    const viaGrpc = await grpc.fail(req).then(
      () => assert.fail("expected an error"),
      (e) => fromConnectError(e),
    );
    assert.equal(viaRest.status, 422);
    assert.equal(viaGrpc.httpStatus, 422);
    assert.equal(viaGrpc.reason, "idempotency_key_mismatch");
  });

  test("interceptors run for REST exactly as for gRPC", async () => {
    seen.length = 0;
    const viaRest = await rest("GET", "/v1/shelves/1", undefined, { "x-deny": "yes", "x-probe": "rest" });
    const viaGrpc = await grpc.getShelf({ shelf: 1n }, { headers: { "x-deny": "yes", "x-probe": "grpc" } }).then(
      () => assert.fail("expected an error"),
      (e) => fromConnectError(e),
    );
    assert.deepEqual(seen, ["GetShelf:rest", "GetShelf:grpc"]);
    assert.equal(viaRest.status, 403);
    assert.deepEqual(viaRest.body, { code: "gate_closed", message: "denied by interceptor" });
    assert.equal(viaGrpc.reason, "gate_closed");
  });

  test("unknown exceptions are internal both ways, with no detail", async () => {
    const viaRest = await rest("POST", "/v1/fail", {});
    const viaGrpc = await grpc.fail({}).then(
      () => assert.fail("expected an error"),
      (e) => e as Error,
    );
    assert.equal(viaRest.status, 500);
    assert.equal(fromConnectError(viaGrpc).codeName, "internal");
    assert.ok(!viaGrpc.message.includes("hunter2"));
    assert.ok(!JSON.stringify(viaRest.body).includes("hunter2"));
  });

  test("the same port serves gRPC-Web and Connect (HTTP/1.1)", async () => {
    for (const transport of [
      createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1" }),
      createConnectTransport({ baseUrl: url, httpVersion: "1.1" }),
      createConnectTransport({ baseUrl: url, httpVersion: "2" }),
    ]) {
      const c = createClient(LibraryService, transport);
      assert.equal((await c.getShelf({ shelf: 5n })).name, "shelf 5");
    }
  });

  test("server streaming: SSE carries what gRPC streams", async () => {
    const s = createClient(StreamService, createGrpcTransport({ baseUrl: url }));
    const viaGrpc: unknown[] = [];
    for await (const m of s.tick({ count: 3, after: 10n })) {
      const json = messageToJson(StreamService.method.tick.output, m) as Record<string, unknown>;
      delete json.seq;
      viaGrpc.push([String(m.seq), json]);
    }
    const text = await (await fetch(`${url}/v1/ticks?count=3&after=10`)).text();
    const viaSse = text
      .trim()
      .split("\n\n")
      .map((block) => {
        const lines = Object.fromEntries(
          block.split("\n").map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 2)]),
        );
        return [lines.id, JSON.parse(lines.data!)];
      });
    assert.equal(viaGrpc.length, 3);
    assert.deepEqual(viaSse, viaGrpc);
  });
});
