import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { after, before, test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { EchoRequestSchema } from "@platform/gen/rpctest/v1/rpctest_pb";
import { testServer } from "../testing/fixture.ts";

const { server } = testServer();
let url = "";
before(async () => {
  url = (await server.listen()).url;
});
after(() => server.close());

function echoCall(session: http2.ClientHttp2Session, repeat: number): http2.ClientHttp2Stream {
  const msg = toBinary(EchoRequestSchema, create(EchoRequestSchema, { text: "x".repeat(1024), repeat }));
  const body = Buffer.alloc(5 + msg.length);
  body.writeUInt32BE(msg.length, 1);
  body.set(msg, 5);
  const req = session.request({
    ":method": "POST",
    ":path": "/rpctest.v1.LibraryService/Echo",
    "content-type": "application/grpc",
    te: "trailers",
  });
  req.end(body);
  return req;
}

// Node refuses a new stream (RST_STREAM ENHANCE_YOUR_CALM) while a session's
// memory, which counts the answer bytes queued behind flow control, is over
// its limit. With the default 10 MB one 8 MiB answer that its reader had not
// yet taken made compute refuse the next ReadFile on the same connection (a
// download through agents keeping four reads in flight failed so).
test("a call on a connection whose earlier 8 MiB answers wait behind flow control is answered", async () => {
  const session = http2.connect(url);
  try {
    // Three 8 MiB answers, none read: the server holds all but the windows' worth.
    const slow = [echoCall(session, 8192), echoCall(session, 8192), echoCall(session, 8192)];
    for (const s of slow) s.pause();
    await Promise.all(slow.map((s) => new Promise((r) => s.once("response", r))));
    await new Promise((r) => setTimeout(r, 100));

    const next = echoCall(session, 1);
    const outcome = await new Promise<string>((resolve) => {
      next.on("trailers", (t) => resolve(`grpc-status ${t["grpc-status"]}`));
      next.on("close", () => resolve(`closed with RST_STREAM code ${next.rstCode}`));
      next.on("error", (e) => resolve(e.message));
      next.resume();
    });
    assert.equal(outcome, "grpc-status 0");
    for (const s of slow) s.resume();
  } finally {
    session.destroy();
  }
});
