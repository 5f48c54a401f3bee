import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import * as http2 from "node:http2";
import { after, before, describe, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { compressionGzip, createGrpcTransport } from "@connectrpc/connect-node";
import {
  EchoRequestSchema,
  LibraryService,
  StreamService,
  TickRequestSchema,
} from "@platform/gen/rpctest/v1/rpctest_pb";
import { fromConnectError } from "../errors.ts";
import { testServer } from "../testing/fixture.ts";
import { readMessage } from "./grpc-direct.ts";

function frame(bytes: Uint8Array, flags = 0): Buffer {
  const f = Buffer.alloc(5 + bytes.length);
  f[0] = flags;
  f.writeUInt32BE(bytes.length, 1);
  f.set(bytes, 5);
  return f;
}

interface RawAnswer {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders;
  body: Buffer;
}

function rawCall(url: string, path: string, body: Buffer, extra: http2.OutgoingHttpHeaders = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    const req = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      ...extra,
    });
    const chunks: Buffer[] = [];
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    req.on("response", (h) => {
      headers = h;
      // Trailers-only: a call that failed before its first message.
      if (h["grpc-status"] !== undefined) trailers = h;
    });
    req.on("trailers", (t) => {
      trailers = t;
    });
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      session.close();
      resolve({ headers, trailers, body: Buffer.concat(chunks) });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const echoPath = "/rpctest.v1.LibraryService/Echo";
const echo = (text: string) => frame(toBinary(EchoRequestSchema, create(EchoRequestSchema, { text })));

describe("plain gRPC calls (served without Connect's handler)", () => {
  const { server } = testServer({ bodyLimitBytes: 1024 });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("a binary call gets one enveloped message and grpc-status 0 in the trailers", async () => {
    const r = await rawCall(url, echoPath, echo("hi"));
    assert.equal(r.headers[":status"], 200);
    assert.equal(r.headers["content-type"], "application/grpc+proto");
    assert.equal(r.trailers["grpc-status"], "0");
    assert.equal(r.body[0], 0);
    assert.equal(r.body.readUInt32BE(1), r.body.length - 5);
    assert.ok(r.body.includes(Buffer.from("hi")));
  });

  test("the same answers, errors and metadata as through Connect (compressed requests take Connect's path)", async () => {
    const plain = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    const viaConnect = createClient(
      LibraryService,
      createGrpcTransport({ baseUrl: url, sendCompression: compressionGzip, compressMinBytes: 0 }),
    );
    for (const c of [plain, viaConnect]) {
      const res = await c.echo({ text: "ab", repeat: 3 }, { headers: { "x-custom": "v" } });
      assert.equal(res.text, "ababab");
      assert.equal(res.headers["x-custom"], "v");
      assert.ok(res.requestId);
      const err = await c.fail({ code: "unavailable", reason: "busy_now", message: "later" }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      assert.equal(err?.code, Code.Unavailable);
      assert.equal(err?.rawMessage, "later");
      assert.equal(err?.metadata.get("retry-after"), "5");
      assert.equal(fromConnectError(err).reason, "busy_now");
      const internal = await c.fail({ code: "" }).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      assert.equal(internal?.code, Code.Internal);
      assert.doesNotMatch(internal?.rawMessage ?? "", /hunter2/);
    }
  });

  test("the call's own deadline (grpc-timeout) cancels the handler", async () => {
    const c = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    await assert.rejects(c.sleep({ ms: 5_000n }, { timeoutMs: 50 }), (e: unknown) => {
      return ConnectError.from(e).code === Code.DeadlineExceeded;
    });
    const r = await rawCall(url, "/rpctest.v1.LibraryService/Sleep", frame(new Uint8Array()), {
      "grpc-timeout": "soon",
    });
    assert.equal(r.trailers["grpc-status"], String(Code.InvalidArgument));
  });

  test("a message over BODY_LIMIT_BYTES → RESOURCE_EXHAUSTED; a malformed envelope → an error status, not a crash", async () => {
    const big = await rawCall(url, echoPath, echo("x".repeat(2000)));
    assert.equal(big.trailers["grpc-status"], String(Code.ResourceExhausted));
    const truncated = await rawCall(url, echoPath, echo("hello").subarray(0, 6));
    assert.equal(truncated.trailers["grpc-status"], String(Code.InvalidArgument));
    const flagged = await rawCall(url, echoPath, frame(new Uint8Array([1, 2]), 1));
    assert.equal(flagged.trailers["grpc-status"], String(Code.Internal));
    const garbage = await rawCall(url, echoPath, frame(new Uint8Array([0xff, 0xff, 0xff])));
    assert.equal(garbage.trailers["grpc-status"], String(Code.InvalidArgument));
    // The server still answers.
    assert.equal((await rawCall(url, echoPath, echo("ok"))).trailers["grpc-status"], "0");
  });

  test("a request message split over many DATA frames arrives whole; a client resetting mid-message leaves the server answering", async () => {
    const whole = echo("split ".repeat(20));
    const session = http2.connect(url);
    try {
      const answer = await new Promise<{ status: unknown; body: Buffer }>((resolve, reject) => {
        const req = session.request({
          ":method": "POST",
          ":path": echoPath,
          "content-type": "application/grpc",
          te: "trailers",
        });
        const chunks: Buffer[] = [];
        let status: unknown;
        req.on("trailers", (t) => {
          status = t["grpc-status"];
        });
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => resolve({ status, body: Buffer.concat(chunks) }));
        req.on("error", reject);
        // The prefix alone, then the rest in pieces, each written after the last has gone.
        const pieces = [whole.subarray(0, 3), whole.subarray(3, 9), whole.subarray(9, 60), whole.subarray(60)];
        const next = (i: number) => {
          if (i === pieces.length) return void req.end();
          req.write(pieces[i], () => setTimeout(() => next(i + 1), 5));
        };
        next(0);
      });
      assert.equal(answer.status, "0");
      assert.ok(answer.body.includes(Buffer.from("split ".repeat(20))));

      // Half a message, then a reset: the read ends without an answer, and nothing is left broken.
      const cut = session.request({ ":method": "POST", ":path": echoPath, "content-type": "application/grpc" });
      cut.on("error", () => {});
      const closed = new Promise((r) => cut.on("close", r));
      cut.write(whole.subarray(0, 20));
      await new Promise((r) => setTimeout(r, 50));
      cut.close(http2.constants.NGHTTP2_CANCEL);
      await closed;
      assert.equal((await rawCall(url, echoPath, echo("after"))).trailers["grpc-status"], "0");
    } finally {
      session.close();
    }
  });

  test("a stream's headers and first message leave before its handler's next step runs", async () => {
    // The handler ends right after its message, busy for a while without awaiting anything (an exec's
    // teardown): its headers and message used to wait for that, the call's metrics and its status.
    // The client is another process, so it reads while this one is busy.
    const { server: s2 } = testServer({
      services: [
        {
          service: StreamService,
          impl: {
            async *tick() {
              try {
                yield { seq: 1n, text: "first" };
              } finally {
                const until = Date.now() + 300;
                while (Date.now() < until);
              }
            },
            async *chat() {},
          },
        },
      ],
    });
    const u = (await s2.listen()).url;
    try {
      const body = frame(toBinary(TickRequestSchema, create(TickRequestSchema, { count: 1 })));
      const client = `
        const http2 = require("node:http2");
        const session = http2.connect(${JSON.stringify(u)});
        const req = session.request({ ":method": "POST", ":path": "/rpctest.v1.StreamService/Tick", "content-type": "application/grpc", te: "trailers" });
        const at = {};
        req.on("response", () => { at.headers = Date.now(); });
        req.on("data", () => { at.data ??= Date.now(); });
        req.on("trailers", (t) => { at.trailers = Date.now(); at.status = t["grpc-status"]; });
        req.on("end", () => { console.log(JSON.stringify(at)); session.close(); });
        req.end(Buffer.from(${JSON.stringify(body.toString("base64"))}, "base64"));
      `;
      const { execFile } = await import("node:child_process");
      const out = await new Promise<string>((resolve, reject) =>
        execFile(process.execPath, ["-e", client], (e, stdout) => (e ? reject(e) : resolve(stdout))),
      );
      const at = JSON.parse(out) as { headers: number; data: number; trailers: number; status: string };
      assert.equal(at.status, "0");
      assert.ok(
        at.trailers - at.data >= 200,
        `first message at ${at.data}, trailers at ${at.trailers}: the message waited for the handler's end`,
      );
      assert.ok(at.data - at.headers < 200);
    } finally {
      await s2.close();
    }
  });

  test("server streams: the same messages, mid-stream errors and early errors as through Connect", async () => {
    const plain = createClient(StreamService, createGrpcTransport({ baseUrl: url }));
    const viaConnect = createClient(
      StreamService,
      createGrpcTransport({ baseUrl: url, sendCompression: compressionGzip, compressMinBytes: 0 }),
    );
    for (const c of [plain, viaConnect]) {
      const seqs: bigint[] = [];
      for await (const t of c.tick({ count: 5, after: 10n })) seqs.push(t.seq);
      assert.deepEqual(seqs, [11n, 12n, 13n, 14n, 15n]);

      const got: bigint[] = [];
      const mid = await (async () => {
        for await (const t of c.tick({ count: 5, failAfter: 2 })) got.push(t.seq);
      })().then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      assert.deepEqual(got, [1n, 2n]);
      assert.equal(mid?.code, Code.Unavailable);

      const early = await (async () => {
        for await (const _ of c.tick({ count: 5, failFirst: true })) assert.fail("no message expected");
      })().then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      assert.equal(early?.code, Code.NotFound);
      assert.equal(fromConnectError(early).reason, "stream_missing");
      assert.equal(early?.metadata.get("retry-after"), "7");
    }
  });

  test("a stream that fails before it opens is a trailers-only status; openStream sends its headers before any message", async () => {
    const tick = "/rpctest.v1.StreamService/Tick";
    const req = (init: Parameters<typeof create<typeof TickRequestSchema>>[1]) =>
      frame(toBinary(TickRequestSchema, create(TickRequestSchema, init)));
    // Failed before it opened: one HEADERS frame carrying the status, so a
    // client knows at the headers that the call was refused.
    const refused = await rawCall(url, tick, req({ failFirst: true }));
    assert.equal(refused.headers["grpc-status"], String(Code.NotFound));
    assert.equal(refused.headers["retry-after"], "7");
    assert.equal(refused.body.length, 0);
    // Opened, then failed: headers without a status, the status in the trailers.
    const failed = await rawCall(url, tick, req({ openFirst: true, failFirst: true }));
    assert.equal(failed.headers["grpc-status"], undefined);
    assert.equal(failed.trailers["grpc-status"], String(Code.NotFound));

    // Opened with no message yet: a client gets the response headers now.
    const c = createClient(StreamService, createGrpcTransport({ baseUrl: url }));
    const ctl = new AbortController();
    let onHeader!: () => void;
    const headers = new Promise<void>((resolve) => {
      onHeader = resolve;
    });
    const reading = (async () => {
      for await (const _ of c.tick({ openFirst: true, waitFirst: true, count: 1 }, { signal: ctl.signal, onHeader }))
        assert.fail("no message expected");
    })().catch((e: unknown) => ConnectError.from(e));
    const timeout = new Promise<string>((resolve) => setTimeout(resolve, 20_000, "no headers"));
    assert.equal(await Promise.race([headers.then(() => "headers"), timeout]), "headers");
    ctl.abort();
    assert.equal((await reading)?.code, Code.Canceled);
  });

  test("large and small streamed messages arrive whole and in order", async () => {
    const { server: s2 } = testServer({ bodyLimitBytes: 4 * 1024 * 1024 });
    const u = (await s2.listen()).url;
    try {
      const chunks = ["a", "b".repeat(300_000), "c", "d".repeat(70_000)];
      const c = createClient(StreamService, createGrpcTransport({ baseUrl: u }));
      const texts: string[] = [];
      for await (const ev of c.chat({ chunks })) if (ev.event.case === "text") texts.push(ev.event.value.content);
      assert.equal(texts[1], chunks[1]);
      assert.deepEqual(
        texts.map((t) => `${t[0]}x${t.length}`),
        [...chunks, "after terminal"].map((t) => `${t[0]}x${t.length}`),
      );
    } finally {
      await s2.close();
    }
  });

  test("a stream client that goes away cancels the handler", async () => {
    const { server: s2, probe } = testServer();
    const u = (await s2.listen()).url;
    try {
      const aborted = probe.nextAbort();
      const c = createClient(StreamService, createGrpcTransport({ baseUrl: u }));
      const ctl = new AbortController();
      const started = Date.now();
      await assert.rejects(async () => {
        for await (const t of c.tick({ count: 1000, intervalMs: 20 }, { signal: ctl.signal })) {
          if (t.seq === 2n) ctl.abort();
        }
      });
      assert.equal(await aborted, "tick");
      // Not the end of the 20 s stream (which aborts a handler's signal too): the cancel itself.
      assert.ok(Date.now() - started < 10_000, `the handler saw the cancel after ${Date.now() - started} ms`);
    } finally {
      await s2.close();
    }
  });

  test("a stream client gone before the first message: the handler answering after its cancel still ends (its finally runs)", async () => {
    const { server: s2, probe } = testServer();
    const u = (await s2.listen()).url;
    try {
      const aborted = probe.nextAbort();
      const ctl = new AbortController();
      const c = createClient(StreamService, createGrpcTransport({ baseUrl: u }));
      const call = (async () => {
        for await (const _ of c.tick({ count: 1, waitFirst: true }, { signal: ctl.signal })) {
          // Nothing comes before the cancel.
        }
      })();
      await new Promise((r) => setTimeout(r, 100));
      ctl.abort();
      await assert.rejects(call);
      assert.equal(await aborted, "tick");
      const until = Date.now() + 5_000;
      while (!probe.calls.get("tick ended") && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      assert.equal(probe.calls.get("tick ended"), 1);
    } finally {
      await s2.close();
    }
  });

  test("a client that goes away cancels the handler", async () => {
    const { server: s2, probe } = testServer();
    const u = (await s2.listen()).url;
    try {
      const aborted = probe.nextAbort();
      const session = http2.connect(u);
      const req = session.request({
        ":method": "POST",
        ":path": "/rpctest.v1.LibraryService/Sleep",
        "content-type": "application/grpc",
      });
      req.on("error", () => {});
      req.end(frame(new Uint8Array([8, 0x90, 0x4e])));
      await new Promise((r) => setTimeout(r, 100));
      session.destroy();
      assert.equal(await aborted, "sleep");
    } finally {
      await s2.close();
    }
  });
});

test("a unary request's read names none of its listeners (keepNames' __name is a defineProperty a closure a call)", async () => {
  const req = Object.assign(new EventEmitter(), { readableEnded: false, destroyed: false, destroy() {} });
  const read = readMessage(req as unknown as http2.Http2ServerRequest, 1024);
  const listeners = ["data", "end", "error", "close"].flatMap((e) => req.listeners(e));
  assert.equal(listeners.length, 4);
  assert.deepEqual(
    listeners.map((l) => l.name),
    ["", "", "", ""],
  );
  req.emit("data", echo("hi"));
  req.emit("end");
  assert.equal((await read).length, echo("hi").length - 5);
});
