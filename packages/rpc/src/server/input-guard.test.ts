import assert from "node:assert/strict";
import * as http from "node:http";
import * as http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { PlatformError } from "@platform/errors";
import {
  ChatResponseSchema,
  EchoRequestSchema,
  FailRequestSchema,
  ListBooksRequestSchema,
  LibraryService,
  StreamService,
} from "@platform/gen/rpctest/v1/rpctest_pb";
import { acceptedId } from "../context.ts";
import { fromConnectError } from "../errors.ts";
import { identityLikeEnvelope, testServer } from "../testing/fixture.ts";
import { inputGuard } from "./input-guard.ts";
import { findStringViolation, stringProblem } from "./string-guard.ts";

describe("findStringViolation", () => {
  test("finds U+0000 and lone surrogates at any depth; well-formed text passes", () => {
    assert.equal(stringProblem("plain, ünïcödé, 日本, \u{1F600}, \uFFFD"), undefined);
    assert.equal(stringProblem("a\0b"), "nul");
    assert.equal(stringProblem("a\ud800b"), "lone_surrogate");
    assert.equal(stringProblem("\udc00"), "lone_surrogate");
    const ok = create(ListBooksRequestSchema, {
      pageToken: "t",
      tags: ["a", "b"],
      filter: { author: "x" },
      after: "y",
    });
    assert.equal(findStringViolation(ListBooksRequestSchema, ok), undefined);
    const cases: Array<[ReturnType<typeof create<typeof ListBooksRequestSchema>>, string, string]> = [
      [create(ListBooksRequestSchema, { pageToken: "a\0" }), "page_token", "nul"],
      [create(ListBooksRequestSchema, { tags: ["ok", "b\ud83d"] }), "tags[1]", "lone_surrogate"],
      [create(ListBooksRequestSchema, { filter: { author: "\0" } }), "filter.author", "nul"],
      [create(ListBooksRequestSchema, { after: "\0" }), "after", "nul"],
      [create(ListBooksRequestSchema, { readMask: { paths: ["a", "\0"] } }), "read_mask.paths[1]", "nul"],
    ];
    for (const [m, path, problem] of cases)
      assert.deepEqual(findStringViolation(ListBooksRequestSchema, m), { path, problem });
    // Map keys and values (the key itself is not echoed), oneof members.
    assert.deepEqual(findStringViolation(FailRequestSchema, create(FailRequestSchema, { extra: { "k\0": "v" } })), {
      path: "extra{}",
      problem: "nul",
    });
    assert.deepEqual(findStringViolation(FailRequestSchema, create(FailRequestSchema, { extra: { k: "\ud800" } })), {
      path: "extra{}.value",
      problem: "lone_surrogate",
    });
    const chat = create(ChatResponseSchema, { event: { case: "text", value: { content: "x\0" } } });
    assert.deepEqual(findStringViolation(ChatResponseSchema, chat), { path: "text.content", problem: "nul" });
  });
});

describe("hostile strings are refused before any handler, on every protocol", () => {
  const reached: string[] = [];
  // Runs after the guard: whatever it records got past it.
  const witness: Interceptor = (next) => (req) => {
    reached.push(req.method.name);
    return next(req);
  };
  const { server } = testServer({ interceptors: [witness] });
  const ident = testServer({ envelope: identityLikeEnvelope, interceptors: [witness] }).server;
  let url = "";
  let identUrl = "";
  before(async () => {
    url = (await server.listen()).url;
    identUrl = (await ident.listen()).url;
  });
  after(async () => {
    await server.close();
    await ident.close();
  });

  const rest = async (base: string, method: string, path: string, raw?: string) => {
    const r = await fetch(base + path, {
      method,
      body: raw,
      headers: raw ? { "content-type": "application/json" } : {},
    });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };

  test("REST: body, path and query strings, map keys, SSE routes: 400 in the service's envelope", async () => {
    reached.length = 0;
    const attempts: Array<[string, string, string?]> = [
      ["POST", "/v1/echo", '{"text":"a\\u0000b"}'],
      ["POST", "/v1/echo", '{"text":"a\\ud800b"}'],
      ["POST", "/v1/echo", '{"text":"\\udfff"}'],
      ["GET", "/v1/echo/a%00b"],
      ["GET", "/v1/tags?tags=ok&tags=%00"],
      ["GET", "/v1/shelves/1/books?filter.author=%00"],
      ["POST", "/v1/fail", '{"code":"not_found","extra":{"k\\u0000":"v"}}'],
      ["POST", "/v1/chat", '{"chunks":["fine","\\u0000"]}'],
    ];
    for (const [method, path, body] of attempts) {
      const r = await rest(url, method, path, body);
      assert.equal(r.status, 400, `${method} ${path} ${body}`);
      assert.equal((r.body.error as { code: string }).code, "invalid_argument", path);
      const i = await rest(identUrl, method, path, body);
      assert.equal(i.status, 400, path);
      assert.equal(i.body.code, "invalid_request", path);
    }
    assert.deepEqual(reached, []);
    // The same requests with well-formed text get through.
    assert.equal((await rest(url, "POST", "/v1/echo", '{"text":"a\\u00e9\\ud83d\\ude00"}')).status, 200);
    assert.deepEqual(reached, ["Echo"]);
  });

  const transports: Array<[string, () => Transport]> = [
    ["gRPC (direct path)", () => createGrpcTransport({ baseUrl: url })],
    ["gRPC JSON (Connect handler)", () => createGrpcTransport({ baseUrl: url, useBinaryFormat: false })],
    ["Connect JSON", () => createConnectTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: false })],
    ["Connect binary", () => createConnectTransport({ baseUrl: url, httpVersion: "2" })],
    ["gRPC-Web", () => createGrpcWebTransport({ baseUrl: url, httpVersion: "1.1", useBinaryFormat: false })],
  ];
  for (const [name, make] of transports) {
    test(`${name}: unary and server-streaming calls with U+0000 are INVALID_ARGUMENT`, async () => {
      reached.length = 0;
      const lib = createClient(LibraryService, make());
      const streams = createClient(StreamService, make());
      const invalid = (e: unknown) =>
        e instanceof ConnectError && e.code === Code.InvalidArgument && /U\+0000/.test(e.rawMessage);
      await assert.rejects(lib.echo({ text: "x\0y" }), invalid);
      await assert.rejects(lib.fail({ code: "not_found", extra: { "\0": "v" } }), invalid);
      await assert.rejects(async () => {
        for await (const _ of streams.chat({ chunks: ["a", "b\0"] })) assert.fail("no event may arrive");
      }, invalid);
      assert.deepEqual(reached, []);
      // JSON carries a lone surrogate as it is; binary cannot (the encoder writes U+FFFD).
      if (name.includes("JSON") || name === "gRPC-Web") {
        await assert.rejects(
          lib.echo({ text: "\ud800" }),
          (e) => e instanceof ConnectError && e.code === Code.InvalidArgument,
        );
        assert.deepEqual(reached, []);
      }
      assert.equal((await lib.echo({ text: "fine ✓" })).text, "fine ✓");
    });
  }

  test("gRPC binary with invalid UTF-8 in a string is INVALID_ARGUMENT and reaches no handler", async () => {
    reached.length = 0;
    // EchoRequest.text (field 1, length-delimited) = 0xC3 0x28, not UTF-8.
    const message = Buffer.from([0x0a, 0x02, 0xc3, 0x28]);
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);
    for (const contentType of ["application/grpc", "application/grpc+proto"]) {
      const trailers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const session = http2.connect(url);
        const req = session.request({
          ":method": "POST",
          ":path": "/rpctest.v1.LibraryService/Echo",
          "content-type": contentType,
          te: "trailers",
        });
        let t: http2.IncomingHttpHeaders = {};
        req.on("response", (h) => {
          if (h["grpc-status"]) t = h;
        });
        req.on("trailers", (h) => {
          t = h;
        });
        req.resume();
        req.on("end", () => {
          session.close();
          resolve(t);
        });
        req.on("error", reject);
        req.end(frame);
      });
      assert.equal(trailers["grpc-status"], String(Code.InvalidArgument), contentType);
    }
    assert.deepEqual(reached, []);
  });

  test("a service's own refusal replaces the default; 'handler' lets a method through", async () => {
    const own = testServer({
      interceptors: [witness],
      inputRefusal: (method, v) => {
        if (method.name === "Echo") return PlatformError.notFound(`no such thing (${v.path})`, "thing_unknown");
        if (method.name === "ListTags") return "handler";
        return undefined;
      },
    }).server;
    const base = (await own.listen()).url;
    try {
      reached.length = 0;
      const c = createClient(LibraryService, createGrpcTransport({ baseUrl: base }));
      const err = fromConnectError(await c.echo({ text: "\0" }).catch((e) => e));
      assert.equal(err.code, Code.NotFound);
      assert.equal(err.reason, "thing_unknown");
      assert.deepEqual((await c.listTags({ tags: ["\0"] })).tags, ["\0"]);
      await assert.rejects(
        c.fail({ reason: "\0" }),
        (e) => e instanceof ConnectError && e.code === Code.InvalidArgument,
      );
      assert.deepEqual(reached, ["ListTags"]);
    } finally {
      await own.close();
    }
  });
});

describe("inputGuard on streams", () => {
  const method = { ...LibraryService.method.echo, methodKind: "client_streaming" } as never;
  async function* messages(...texts: string[]) {
    for (const text of texts) yield create(EchoRequestSchema, { text });
  }
  test("a client stream is checked message by message, as the handler reads it", async () => {
    const seen: string[] = [];
    const next = async (req: { message: AsyncIterable<{ text: string }> }) => {
      for await (const m of req.message) seen.push(m.text);
      return {} as never;
    };
    const guarded = inputGuard()(next as never);
    const req = (message: AsyncIterable<unknown>) =>
      ({ stream: true, method, service: LibraryService, message }) as never;
    await guarded(req(messages("a", "b")));
    assert.deepEqual(seen, ["a", "b"]);
    seen.length = 0;
    await assert.rejects(
      guarded(req(messages("ok", "x\0", "never read"))),
      (e) => e instanceof PlatformError && /U\+0000/.test(e.message),
    );
    assert.deepEqual(seen, ["ok"]);
  });
});

describe("request ids and internal errors", () => {
  const thrower: Interceptor = (next) => (req) => {
    // What Connect makes of a TypeError in a client call (e.g. a header value it cannot send).
    if (req.header.get("x-explode") === "1") {
      throw ConnectError.from(
        new TypeError("Cannot convert argument to a ByteString because the character at index 0 has a value of 26085"),
      );
    }
    return next(req);
  };
  const { server } = testServer({ interceptors: [thrower] });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("acceptedId: short printable tokens only", () => {
    for (const ok of ["a", "req-1", "0f:ab.c_d", "x".repeat(128)]) assert.equal(acceptedId(ok), ok);
    for (const bad of ["", null, undefined, "x".repeat(129), "日本", "é", "a b", "a\tb", "a\0", "\u{1F600}"]) {
      assert.equal(acceptedId(bad), undefined, String(bad));
    }
  });

  test("x-request-id / x-trace-id that are not short printable tokens are replaced (HTTP/1.1 and HTTP/2)", async () => {
    const utf8 = Buffer.from("日本", "utf8").toString("latin1");
    const viaH1 = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>(
      (resolve, reject) => {
        const req = http.request(`${url}/v1/echo`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-request-id": utf8, "x-trace-id": "t".repeat(129) },
        });
        req.on("response", (res) => {
          let body = "";
          res.on("data", (c) => {
            body += c;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        });
        req.on("error", reject);
        req.end('{"text":"hi"}');
      },
    );
    assert.equal(viaH1.status, 200);
    assert.match(String(viaH1.headers["x-request-id"]), /^[0-9a-f-]{36}$/);
    assert.match(String(viaH1.headers["x-trace-id"]), /^[0-9a-f]{32}$/);
    assert.equal((JSON.parse(viaH1.body) as { requestId: string }).requestId, viaH1.headers["x-request-id"]);
    const c = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    const res = await c.echo({ text: "hi" }, { headers: { "x-request-id": utf8, "x-trace-id": "ok-trace" } });
    assert.match(res.requestId, /^[0-9a-f-]{36}$/);
    assert.equal(res.headers["x-trace-id"], "ok-trace");
  });

  test("an internal ConnectError no platform service raised leaves as a generic internal, on gRPC and REST", async () => {
    const c = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    const err = await c.echo({ text: "hi" }, { headers: { "x-explode": "1" } }).catch((e) => e);
    assert.ok(err instanceof ConnectError);
    assert.equal(err.code, Code.Internal);
    assert.equal(err.rawMessage, "internal error");
    const r = await fetch(`${url}/v1/echo`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-explode": "1" },
      body: "{}",
    });
    assert.equal(r.status, 500);
    assert.doesNotMatch(await r.text(), /ByteString/);
    // A client of another service gets the same: its text stays in the cause.
    const p = fromConnectError(
      new ConnectError("connect ECONNREFUSED 10.0.0.7:50051 select * from keys", Code.Unknown),
    );
    assert.equal(p.code, Code.Internal);
    assert.equal(p.message, "internal error");
    // Statuses a platform service raised keep their message.
    const own = fromConnectError(await c.fail({ code: "internal", message: "exec transport failure" }).catch((e) => e));
    assert.equal(own.message, "exec transport failure");
  });
});
