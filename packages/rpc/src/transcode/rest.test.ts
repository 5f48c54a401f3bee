import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { IdentityRestCode } from "@platform/errors";
import { pino } from "pino";
import { identityLikeEnvelope, testServer } from "../testing/fixture.ts";

type Res = { status: number; headers: Headers; body: unknown; text: string };

function client(base: () => string) {
  return async (method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Res> => {
    const r = await fetch(base() + path, {
      method,
      body,
      headers: body === undefined ? headers : { "content-type": "application/json", ...headers },
    });
    const text = await r.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: r.status, headers: r.headers, body: parsed, text };
  };
}

describe("REST transcoding (agents envelope)", () => {
  const { server } = testServer({ bodyLimitBytes: 1024 });
  let url = "";
  const call = client(() => url);
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("{field} path variable typed as int64", async () => {
    const r = await call("GET", "/v1/shelves/12");
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { shelf: 12, name: "shelf 12" });
  });

  test("ill-typed path variable → 400", async () => {
    const r = await call("GET", "/v1/shelves/abc");
    assert.equal(r.status, 400);
    assert.equal((r.body as { error: { code: string } }).error.code, "invalid_argument");
  });

  test("{name=shelves/*/books/*} and response_body", async () => {
    const r = await call("GET", "/v1/shelves/1/books/2");
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { name: "shelves/1/books/2", title: "T", pages: 10 });
  });

  test("response_body naming an empty repeated field is []", async () => {
    assert.deepEqual((await call("GET", "/v1/tags")).body, []);
    assert.deepEqual((await call("GET", "/v1/tags?tags=a&tags=b")).body, ["a", "b"]);
  });

  test("body: <field> with 201 from the contract, handler headers and trailers copied", async () => {
    const r = await call(
      "POST",
      "/v1/shelves/7/books",
      JSON.stringify({ title: "x", pages: "3", kind: "KIND_POETRY" }),
    );
    assert.equal(r.status, 201);
    assert.deepEqual(r.body, { shelf: 7, book: { title: "x", pages: 3, kind: "KIND_POETRY" } });
    assert.equal(r.headers.get("idempotent-replayed"), "false");
    assert.equal(r.headers.get("x-trailer"), "t");
  });

  test("nested path variable {book.name=...} merges into the body field", async () => {
    const r = await call(
      "PATCH",
      "/v1/shelves/1/books/2?update_mask=title,pages",
      JSON.stringify({ name: "ignored", title: "new" }),
    );
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { book: { name: "shelves/1/books/2", title: "new" }, updateMask: "title,pages" });
  });

  test("204 from the contract has no body", async () => {
    const r = await call("DELETE", "/v1/shelves/1/books/2");
    assert.equal(r.status, 204);
    assert.equal(r.text, "");
    assert.equal(r.headers.get("content-type"), null);
  });

  test("** keeps %2F encoded; :verb", async () => {
    assert.deepEqual((await call("GET", "/v1/files/a/b%2Fc/d")).body, { path: "a/b%2Fc/d" });
    assert.deepEqual((await call("POST", "/v1/operations/x/y:cancel")).body, { name: "operations/x/y" });
    assert.equal((await call("POST", "/v1/operations/x/y:stop")).status, 404);
  });

  test("additional_bindings: body *, path-only GET, body <field> with a scalar", async () => {
    assert.equal(
      ((await call("POST", "/v1/echo", JSON.stringify({ text: "a", repeat: 2 }))).body as { text: string }).text,
      "aa",
    );
    assert.equal(((await call("GET", "/v1/echo/x%2Fy")).body as { text: string }).text, "x/y");
    assert.equal(((await call("PUT", "/v1/echo:shout", JSON.stringify("loud"))).body as { text: string }).text, "loud");
  });

  test("empty body on a body route is an empty message", async () => {
    const r = await fetch(`${url}/v1/echo`, { method: "POST" });
    assert.equal(r.status, 200);
  });

  test("query parameters: nested, JSON and proto names, repeated, enums, wrappers, WKTs", async () => {
    const q = [
      "pageSize=5",
      "page_token=abc",
      "tags=a",
      "tags=b",
      "kind=KIND_NOVEL",
      "kinds=1",
      "kinds=KIND_POETRY",
      "include_deleted=true",
      "filter.author=ann",
      "filter.pages.min=4",
      "minPages=7",
      "since=2024-01-01T00:00:00Z",
      "max_age=3.5s",
      "ids=1",
      "ids=-2",
      "offset=18446744073709551615",
      "ratio=0.25",
      "after=",
      "read_mask=a.b,c",
      "flag=false",
      "token=AAE=",
      "weight=1.5",
      "delta=-3",
      "big=9007199254740993",
    ].join("&");
    const r = await call("GET", `/v1/shelves/3/books?${q}`);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual((r.body as { request: unknown }).request, {
      shelf: 3,
      pageSize: 5,
      pageToken: "abc",
      tags: ["a", "b"],
      kind: "KIND_NOVEL",
      kinds: ["KIND_NOVEL", "KIND_POETRY"],
      includeDeleted: true,
      filter: { author: "ann", pages: { min: 4 } },
      minPages: 7,
      since: "2024-01-01T00:00:00Z",
      maxAge: "3.500s",
      ids: [1, -2],
      // Beyond 2^53 a 64-bit integer stays a string so no digit is lost.
      offset: "18446744073709551615",
      ratio: 0.25,
      after: "",
      readMask: "a.b,c",
      flag: false,
      token: "AAE=",
      weight: 1.5,
      delta: -3,
      big: "9007199254740993",
    });
  });

  for (const [q, why] of [
    ["bogus=1", "unknown parameter"],
    ["filter.nope=1", "unknown nested parameter"],
    ["page_size=abc", "int32 not a number"],
    ["page_size=1.5", "int32 fraction"],
    ["page_size=2147483648", "int32 overflow"],
    ["offset=-1", "uint64 negative"],
    ["include_deleted=maybe", "bool"],
    ["kind=KIND_NOPE", "enum name"],
    ["kind=9", "enum number"],
    ["since=yesterday", "timestamp"],
    ["max_age=3", "duration without unit"],
    ["min_pages=x", "wrapper"],
    ["page_size=1&page_size=2", "singular given twice"],
    ["filter=x", "message from a string"],
    ["shelf=4", "field bound by the path"],
    ["ratio=abc", "double"],
  ] as const) {
    test(`query ${q} → 400 (${why})`, async () => {
      const r = await call("GET", `/v1/shelves/3/books?${q}`);
      assert.equal(r.status, 400, r.text);
      assert.equal((r.body as { error: { code: string } }).error.code, "invalid_argument");
    });
  }

  test("query parameters on a body:* route → 400", async () => {
    assert.equal((await call("POST", "/v1/echo?text=x", "{}")).status, 400);
  });

  test("no route → 404 envelope; wrong method → 405 with Allow", async () => {
    const nf = await call("GET", "/v1/nowhere");
    assert.equal(nf.status, 404);
    assert.deepEqual(nf.body, { error: { code: "not_found", message: "no route for GET /v1/nowhere" } });
    const na = await call("POST", "/v1/shelves/1");
    assert.equal(na.status, 405);
    assert.equal(na.headers.get("allow"), "GET");
    // The same code as identity's envelope (EdgeCode), not a Connect code name.
    assert.deepEqual(na.body, { error: { code: "method_not_allowed", message: "method POST not allowed" } });
    const multi = await call("DELETE", "/v1/echo");
    assert.equal(multi.status, 405);
    assert.equal(multi.headers.get("allow"), "POST");
  });

  test("body over the limit → 413 envelope", async () => {
    const r = await call("POST", "/v1/echo", JSON.stringify({ text: "x".repeat(2000) }));
    assert.equal(r.status, 413);
    assert.equal((r.body as { error: { code: string } }).error.code, "payload_too_large");
  });

  test("chunked body over the limit (no Content-Length) → 413", async () => {
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < 4; i++) c.enqueue(new TextEncoder().encode(`"${"y".repeat(400)}"`));
        c.close();
      },
    });
    const r = await fetch(`${url}/v1/echo`, {
      method: "POST",
      body: stream,
      headers: { "content-type": "application/json" },
      duplex: "half",
    } as RequestInit);
    assert.equal(r.status, 413);
  });

  test("wrong Content-Type → 415; malformed JSON, wrong types, non-object → 400", async () => {
    const media = await call("POST", "/v1/echo", "{}", { "content-type": "text/plain" });
    assert.equal(media.status, 415);
    assert.equal((media.body as { error: { code: string } }).error.code, "unsupported_media_type");
    assert.equal((await fetch(`${url}/v1/echo`, { method: "POST", body: "{}" })).status, 415);
    assert.equal((await call("POST", "/v1/echo", "{bad")).status, 400);
    assert.equal((await call("POST", "/v1/echo", JSON.stringify({ repeat: "many" }))).status, 400);
    assert.equal((await call("POST", "/v1/echo", JSON.stringify([1]))).status, 400);
    const charset = await call("POST", "/v1/echo", "{}", { "content-type": "application/json; charset=utf-8" });
    assert.equal(charset.status, 200);
  });

  test("a body on a no-body route → 400", async () => {
    const r = await call("GET", "/v1/shelves/1", undefined);
    assert.equal(r.status, 200);
    const withBody = await call("POST", "/v1/operations/a:cancel", JSON.stringify({ name: "x" }));
    assert.equal(withBody.status, 400);
  });

  test("PlatformError → envelope with the code's status, or its httpStatus", async () => {
    const nf = await call("POST", "/v1/fail", JSON.stringify({ code: "not_found", message: "gone" }));
    assert.equal(nf.status, 404);
    assert.deepEqual(nf.body, { error: { code: "not_found", message: "gone" } });
    const conflict = await call("POST", "/v1/fail", JSON.stringify({ code: "already_exists", message: "slug taken" }));
    assert.equal(conflict.status, 409);
    const custom = await call(
      "POST",
      "/v1/fail",
      JSON.stringify({ code: "invalid_argument", message: "m", http_status: 422 }),
    );
    assert.equal(custom.status, 422);
    const unav = await call("POST", "/v1/fail", JSON.stringify({ code: "unavailable", message: "down" }));
    assert.equal(unav.status, 503);
    // A header the handler set before throwing reaches the error response.
    assert.equal(unav.headers.get("retry-after"), "5");
  });

  test("request headers reach the handler, ids are echoed", async () => {
    const r = await call("POST", "/v1/echo", JSON.stringify({ text: "h" }), {
      authorization: "Bearer tok",
      "idempotency-key": "k1",
      "x-custom": "c",
      "x-request-id": "req-123",
      "x-trace-id": "trace-9",
    });
    const body = r.body as { headers: Record<string, string>; requestId: string };
    assert.deepEqual(body.headers, {
      authorization: "Bearer tok",
      "idempotency-key": "k1",
      "x-custom": "c",
      "x-request-id": "req-123",
      "x-trace-id": "trace-9",
    });
    assert.equal(body.requestId, "req-123");
    assert.equal(r.headers.get("x-request-id"), "req-123");
    assert.equal(r.headers.get("x-trace-id"), "trace-9");
  });

  test("a hostile request id is replaced by a generated one", async () => {
    const r = await call("GET", "/v1/shelves/1", undefined, { "x-request-id": "a b<script>" });
    assert.match(r.headers.get("x-request-id")!, /^[0-9a-f-]{36}$/);
  });
});

describe("identity envelope and unknown exceptions", () => {
  const lines: string[] = [];
  const logger = pino({ level: "info" }, { write: (s: string) => lines.push(s) });
  const { server } = testServer({ envelope: identityLikeEnvelope, logger, bodyLimitBytes: 300 });
  let url = "";
  const call = client(() => url);
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("reason, message and extra fields at top level", async () => {
    const r = await call(
      "POST",
      "/v1/fail",
      JSON.stringify({
        code: "unauthenticated",
        reason: "refresh_token_reused",
        message: "reused",
        extra: { action: "re_authenticate" },
      }),
    );
    assert.equal(r.status, 401);
    assert.deepEqual(r.body, { code: "refresh_token_reused", message: "reused", action: "re_authenticate" });
  });

  test("transport faults use identity's codes", async () => {
    assert.deepEqual((await call("POST", "/v1/echo", "{bad")).body, {
      code: IdentityRestCode.invalidRequest,
      message: "malformed JSON body",
    });
    const wrongType = await call("POST", "/v1/echo", JSON.stringify({ repeat: true }));
    assert.equal(wrongType.status, 400);
    assert.equal((wrongType.body as { code: string }).code, IdentityRestCode.invalidRequest);
    const big = await call("POST", "/v1/echo", JSON.stringify({ text: "z".repeat(400) }));
    assert.equal(big.status, 413);
    assert.equal((big.body as { code: string }).code, IdentityRestCode.payloadTooLarge);
    const media = await call("POST", "/v1/echo", "{}", { "content-type": "text/xml" });
    assert.equal(media.status, 415);
    assert.equal((media.body as { code: string }).code, IdentityRestCode.unsupportedMediaType);
    const nf = await call("GET", "/nowhere");
    assert.equal((nf.body as { code: string }).code, IdentityRestCode.resourceNotFound);
    const na = await call("PUT", "/v1/shelves/1");
    assert.equal(na.status, 405);
    assert.equal((na.body as { code: string }).code, IdentityRestCode.methodNotAllowed);
  });

  test("errors without a specific reason map to identity's shared codes", async () => {
    const r = await call("POST", "/v1/fail", JSON.stringify({ code: "permission_denied", message: "owner only" }));
    assert.equal(r.status, 403);
    assert.equal((r.body as { code: string }).code, IdentityRestCode.insufficientRole);
    const nf = await call("POST", "/v1/fail", JSON.stringify({ code: "not_found", message: "x" }));
    assert.equal((nf.body as { code: string }).code, IdentityRestCode.resourceNotFound);
  });

  test("an unexpected exception → 500 internal, nothing leaked, logged with the request id", async () => {
    const r = await call("POST", "/v1/fail", JSON.stringify({}), { "x-request-id": "leak-check-1" });
    assert.equal(r.status, 500);
    assert.deepEqual(r.body, { code: "internal", message: "internal error" });
    for (const secret of ["hunter2", "select", "postgres", "stack", "at "]) assert.ok(!r.text.includes(secret), secret);
    const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "unhandled error in handler");
    assert.ok(logged, "the exception is logged");
    assert.equal(logged.requestId, "leak-check-1");
    assert.match(logged.err.message, /hunter2/);
  });
});

describe("REST over h2c", () => {
  const { server, probe } = testServer({ bodyLimitBytes: 64 });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  const h2request = async (method: string, path: string, body?: string) => {
    const http2 = await import("node:http2");
    const session = http2.connect(url);
    try {
      return await new Promise<{ status: number; body: string; headers: Record<string, unknown> }>(
        (resolve, reject) => {
          const req = session.request({ ":method": method, ":path": path, "content-type": "application/json" });
          let status = 0;
          let headers: Record<string, unknown> = {};
          let data = "";
          req.on("response", (h) => {
            status = Number(h[":status"]);
            headers = h;
          });
          req.on("data", (d) => (data += d));
          req.on("end", () => resolve({ status, body: data, headers }));
          req.on("error", reject);
          req.end(body);
        },
      );
    } finally {
      session.close();
    }
  };

  test("the same routes answer over HTTP/2 prior knowledge", async () => {
    const ok = await h2request("GET", "/v1/shelves/5");
    assert.equal(ok.status, 200);
    assert.deepEqual(JSON.parse(ok.body), { shelf: 5, name: "shelf 5" });
    const big = await h2request("POST", "/v1/echo", JSON.stringify({ text: "q".repeat(100) }));
    assert.equal(big.status, 413);
    const sse = await h2request("GET", "/v1/ticks?count=1");
    assert.equal(sse.headers["content-type"], "text/event-stream");
    assert.equal(sse.body, 'id: 1\ndata: {"text":"tick 1","tokens":1000,"last":true}\n\n');
  });

  test("a client that goes away mid-call cancels the handler", async () => {
    const http2 = await import("node:http2");
    const aborted = probe.nextAbort();
    const session = http2.connect(url);
    const req = session.request({ ":method": "GET", ":path": "/v1/sleep?ms=10000" });
    req.on("error", () => {});
    await new Promise((r) => setTimeout(r, 100));
    session.destroy();
    const timer = new Promise((r) => setTimeout(() => r("handler not cancelled"), 5000).unref());
    assert.equal(await Promise.race([aborted, timer]), "sleep");
  });

  test("HEAD is answered like GET without a body", async () => {
    const r = await fetch(`${url}/v1/shelves/5`, { method: "HEAD" });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), "");
  });
});
