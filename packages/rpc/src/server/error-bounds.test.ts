// Every error message a service sends is bounded (error-bounds.ts), on every
// protocol, and one channel survives a flood of calls whose errors would
// otherwise carry 90 KB messages: Node client, raw HTTP/2 and python3-grpcio.
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { EchoRequestSchema, FailRequestSchema, LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { boundText, MAX_ERROR_MESSAGE_BYTES, MAX_ERROR_MESSAGE_CHARS } from "../error-bounds.ts";
import { fromConnectError } from "../errors.ts";
import { grpcioFlood, hasGrpcio } from "../testing/grpcio-flood.ts";
import { testServer } from "../testing/fixture.ts";

const huge = `${"x/../".repeat(18_000)}end`; // 90 KB, as a hostile path would be quoted
const medium = `path ${JSON.stringify("p/".repeat(2_250))} is outside /workspace`; // the 4.5 KB message of the report
const wide = "路径".repeat(2_000) + "😀".repeat(1_000); // 3-byte and 4-byte characters
const bigExtra = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`key${i}`.repeat(50), "値".repeat(5_000)]));
const failure = (message: string, extra = bigExtra) => ({
  code: "invalid_argument",
  reason: "bad_path",
  message,
  extra,
});

function assertBounded(message: string): void {
  assert.ok([...message].length <= MAX_ERROR_MESSAGE_CHARS, `${[...message].length} characters`);
  assert.ok(Buffer.byteLength(message) <= MAX_ERROR_MESSAGE_BYTES, `${Buffer.byteLength(message)} bytes`);
  assert.ok(message.endsWith("…"));
  assert.doesNotMatch(message, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])/, "no lone high surrogate");
}

describe("boundText", () => {
  test("leaves short text alone and cuts long text to 512 characters and 1 KiB with an ellipsis", () => {
    assert.equal(boundText("path escapes the workspace"), "path escapes the workspace");
    const exact = "y".repeat(MAX_ERROR_MESSAGE_CHARS);
    assert.equal(boundText(exact), exact);
    assertBounded(boundText(huge));
    assert.equal(boundText(huge).length, MAX_ERROR_MESSAGE_CHARS);
    assertBounded(boundText(wide));
    assertBounded(boundText("😀".repeat(600)));
  });
});

describe("error messages on the wire", () => {
  const { server } = testServer();
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("gRPC (direct path and Connect's handler), Connect and REST carry a bounded message", async () => {
    const clients = {
      grpc: createClient(LibraryService, createGrpcTransport({ baseUrl: url })),
      // A compressed request is served by Connect's own gRPC handler.
      grpcViaConnect: createClient(
        LibraryService,
        createGrpcTransport({ baseUrl: url, sendCompression: compressionGzip, acceptCompression: [compressionGzip] }),
      ),
      connect: createClient(LibraryService, createConnectTransport({ baseUrl: url, httpVersion: "1.1" })),
    };
    for (const [name, client] of Object.entries(clients)) {
      for (const message of [huge, wide]) {
        await assert.rejects(client.fail(failure(message)), (e: unknown) => {
          const err = fromConnectError(e);
          assert.equal(err.code, Code.InvalidArgument, `${name}: ${err.message}`);
          assert.equal(err.reason, "bad_path", name);
          assertBounded(err.message);
          assert.ok(message.startsWith(err.message.slice(0, -1)), `${name}: a prefix of the original`);
          const values = Object.values(err.extra);
          assert.ok(
            values.length <= 8 && values.every((v) => Buffer.byteLength(v) <= 128),
            `${name}: ErrorInfo metadata bounded`,
          );
          return true;
        });
      }
    }
    const rest = await fetch(`${url}/v1/fail`, {
      method: "POST",
      body: JSON.stringify(failure(huge)),
      headers: { "content-type": "application/json" },
    });
    assert.equal(rest.status, 400);
    const body = (await rest.json()) as { error: { message: string } };
    assertBounded(body.error.message);
  });

  test("the status trailers of a huge error stay far below what gRPC peers accept (8 KiB in C core)", async () => {
    const session = http2.connect(url);
    const binary = (message: string) => toBinary(FailRequestSchema, create(FailRequestSchema, failure(message)));
    // Connect's handler (a JSON message) refuses a malformed grpc-timeout before any interceptor runs, quoting it.
    const badTimeout = { "grpc-timeout": "9".repeat(20_000) };
    const cases: [string, Uint8Array, http2.OutgoingHttpHeaders][] = [
      ["application/grpc", binary(huge), {}],
      ["application/grpc", binary(wide), {}],
      ["application/grpc+json", new TextEncoder().encode("{}"), badTimeout],
      ["application/grpc", binary("short"), badTimeout],
    ];
    try {
      for (const [type, payload, extra] of cases) {
        const framed = Buffer.alloc(5 + payload.length);
        framed.writeUInt32BE(payload.length, 1);
        framed.set(payload, 5);
        const trailers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
          const req = session.request({
            ":method": "POST",
            ":path": "/rpctest.v1.LibraryService/Fail",
            "content-type": type,
            te: "trailers",
            ...extra,
          });
          let got: http2.IncomingHttpHeaders = {};
          // A call refused before any message may be trailers-only (the status in the headers).
          req.on("response", (h) => {
            if (h["grpc-status"] !== undefined) got = h;
          });
          req.on("trailers", (t) => {
            got = t;
          });
          req.on("data", () => {});
          req.on("end", () => resolve(got));
          req.on("error", reject);
          req.end(framed);
        });
        assert.ok(
          trailers["grpc-status"] === String(Code.InvalidArgument) || trailers["grpc-status"] === String(Code.Unknown),
          `${type}: status ${trailers["grpc-status"]}`,
        );
        const size = Object.entries(trailers).reduce((n, [k, v]) => n + k.length + String(v).length, 0);
        assert.ok(size < 8 * 1024, `trailers are ${size} bytes`);
        assert.ok(String(trailers["grpc-message"]).length <= 3 * MAX_ERROR_MESSAGE_BYTES);
      }
    } finally {
      session.close();
    }
  });

  test("one Node channel: 300 calls with 90 KB error messages, all INVALID_ARGUMENT, then a normal call", async () => {
    const client = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    const results = await Promise.allSettled(
      Array.from({ length: 300 }, (_, i) => client.fail(failure(i % 2 ? huge : wide, {}))),
    );
    const codes = new Map<string, number>();
    for (const r of results) {
      const name = r.status === "fulfilled" ? "OK" : Code[ConnectError.from(r.reason).code];
      codes.set(name ?? "?", (codes.get(name ?? "?") ?? 0) + 1);
    }
    assert.deepEqual([...codes], [["InvalidArgument", 300]]);
    assert.equal((await client.echo({ text: "still here" })).text, "still here");
  });

  test("one python3-grpcio channel: 300 such calls, all INVALID_ARGUMENT, then a normal call", async (t) => {
    if (!(await hasGrpcio())) {
      t.skip("python3-grpcio not installed (scripts/setup.sh installs it)");
      return;
    }
    const target = new URL(url).host;
    const result = await grpcioFlood({
      target,
      method: "/rpctest.v1.LibraryService/Fail",
      requests: [huge, wide, medium].map((m) => toBinary(FailRequestSchema, create(FailRequestSchema, failure(m, {})))),
      rounds: 100,
      final: {
        method: "/rpctest.v1.LibraryService/Echo",
        request: toBinary(EchoRequestSchema, create(EchoRequestSchema, { text: "ok" })),
      },
    });
    assert.deepEqual(result.codes, { INVALID_ARGUMENT: 300 }, JSON.stringify(result.samples));
    assert.ok(result.max_message <= MAX_ERROR_MESSAGE_BYTES, `message of ${result.max_message} bytes`);
    assert.ok(result.max_trailing < 4096, `trailing metadata of ${result.max_trailing} bytes`);
    assert.equal(result.final, "OK");
  });
});
