import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { Writable } from "node:stream";
import { after, before, test } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { compressionGzip, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  EchoRequestSchema,
  EchoResponseSchema,
  LibraryService,
  StreamService,
} from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import { countAbortControllers } from "../testing/abort-count.ts";
import { testServer } from "../testing/fixture.ts";

// Node's HTTP/2 server emits `request` once its compatibility layer has made a
// request and response for a stream: counted here for every server of the
// process (the class is not exported; its prototype is the created server's).
const serverProto = Object.getPrototypeOf(http2.createServer()) as { emit: (...args: unknown[]) => boolean };
const requestEvents: string[] = [];

const lines: Record<string, unknown>[] = [];
const sink = new Writable({
  write(chunk, _enc, done) {
    for (const l of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(l));
    done();
  },
});
const { server } = testServer({ logger: pino({ level: "info" }, sink) });
let url = "";
before(async () => {
  serverProto.emit = function (this: http2.Http2Server, event: unknown, ...args: unknown[]) {
    if (event === "request") requestEvents.push((args[0] as http2.Http2ServerRequest).url);
    return Object.getPrototypeOf(serverProto).emit.call(this, event, ...args);
  };
  url = (await server.listen()).url;
});
after(async () => {
  delete (serverProto as Partial<typeof serverProto>).emit;
  await server.close();
});

test("plain gRPC calls are served from their HTTP/2 streams, without Node's compatibility layer, through the same request entry", async () => {
  const grpc = createGrpcTransport({ baseUrl: url });
  const echo = await createClient(LibraryService, grpc).echo(
    { text: "ab", repeat: 2 },
    { headers: { "x-request-id": "direct-1" } },
  );
  assert.equal(echo.text, "abab");
  const seqs: bigint[] = [];
  for await (const t of createClient(StreamService, grpc).tick({ count: 3 })) seqs.push(t.seq);
  assert.deepEqual(seqs, [1n, 2n, 3n]);
  assert.deepEqual(requestEvents, []);

  // The entry ran for them: the request id given, the access line and the HTTP metrics at the close, in flight 0 after.
  await new Promise((r) => setTimeout(r, 50));
  const access = lines.filter((l) => l.msg === "request");
  assert.deepEqual(
    access.map((l) => [l.method, l.path, l.status]),
    [
      ["POST", "/rpctest.v1.LibraryService/Echo", 200],
      ["POST", "/rpctest.v1.StreamService/Tick", 200],
    ],
  );
  assert.equal(access[0]?.requestId, "direct-1");
  const metrics = await server.metrics.registry.metrics();
  assert.match(metrics, /platform_http_requests_total\{[^}]*route="\/rpctest.v1.StreamService\/Tick"[^}]*\} 1/);
  assert.match(metrics, /platform_http_requests_in_flight\{server="rpctest"\} 0/);

  // Everything else still goes through the layer: gRPC with a compressed message, Connect over HTTP/2.
  const gzip = createGrpcTransport({ baseUrl: url, sendCompression: compressionGzip, compressMinBytes: 0 });
  assert.equal((await createClient(LibraryService, gzip).echo({ text: "z" })).text, "z");
  const connect = createConnectTransport({ baseUrl: url, httpVersion: "2" });
  assert.equal((await createClient(LibraryService, connect).echo({ text: "c" })).text, "c");
  assert.deepEqual(requestEvents, ["/rpctest.v1.LibraryService/Echo", "/rpctest.v1.LibraryService/Echo"]);
});

test("a plain gRPC unary call whose handler and interceptors never read its signal makes no AbortSignal", async () => {
  // A raw HTTP/2 client: connect's own would make controllers of its own in this process.
  const session = http2.connect(url);
  const call = () =>
    new Promise<{ text: string; status: string | undefined }>((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": "/rpctest.v1.LibraryService/Echo",
        "content-type": "application/grpc",
        te: "trailers",
      });
      const body = toBinary(EchoRequestSchema, create(EchoRequestSchema, { text: "signal" }));
      const head = Buffer.alloc(5);
      head.writeUInt32BE(body.length, 1);
      const chunks: Buffer[] = [];
      let status: string | undefined;
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("trailers", (t) => {
        status = t["grpc-status"] as string | undefined;
      });
      stream.on("error", reject);
      stream.on("close", () => {
        const all = Buffer.concat(chunks);
        resolve({ text: all.length > 5 ? fromBinary(EchoResponseSchema, all.subarray(5)).text : "", status });
      });
      stream.end(Buffer.concat([head, body]));
    });
  try {
    await call(); // the connection and the server's first-call work
    const made = countAbortControllers();
    let answer: Awaited<ReturnType<typeof call>>;
    try {
      answer = await call();
    } finally {
      made.restore();
    }
    assert.deepEqual(answer, { text: "signal", status: "0" });
    assert.equal(made.count, 0, "AbortControllers made for the call");
  } finally {
    session.close();
  }
});
