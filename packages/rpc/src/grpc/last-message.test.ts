import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  FinishRequestSchema,
  type FinishResponse,
  FinishResponseSchema,
  StreamService,
} from "@platform/gen/rpctest/v1/rpctest_pb";
import { lastMessageOf } from "../calls/last-message.ts";
import { testServer } from "../testing/fixture.ts";

const finishPath = "/rpctest.v1.StreamService/Finish";

interface Answer {
  status: string | undefined;
  messages: FinishResponse[];
}

/** One plain gRPC Finish call over HTTP/2: its messages and the status of its trailers. */
function finish(url: string, req: { chunks?: string[]; failAfter?: string; extraAfter?: boolean }): Promise<Answer> {
  const body = toBinary(FinishRequestSchema, create(FinishRequestSchema, req));
  const framed = Buffer.alloc(5 + body.length);
  framed.writeUInt32BE(body.length, 1);
  framed.set(body, 5);
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    const call = session.request({
      ":method": "POST",
      ":path": finishPath,
      "content-type": "application/grpc",
      te: "trailers",
    });
    const chunks: Buffer[] = [];
    let status: string | undefined;
    call.on("trailers", (t) => {
      status = t["grpc-status"] as string;
    });
    call.on("data", (c: Buffer) => chunks.push(c));
    call.on("end", () => {
      session.close();
      const all = Buffer.concat(chunks);
      const messages: FinishResponse[] = [];
      for (let at = 0; at < all.length; at += 5 + all.readUInt32BE(at + 1))
        messages.push(fromBinary(FinishResponseSchema, all.subarray(at + 5, at + 5 + all.readUInt32BE(at + 1))));
      resolve({ status, messages });
    });
    call.on("error", reject);
    call.end(framed);
  });
}

/** platform_rpc_server_handled_total of Finish by code, and its open streams. */
async function finishMetrics(server: ReturnType<typeof testServer>["server"]) {
  const handled: Record<string, number> = {};
  for (const v of (await server.metrics.rpcHandled.get()).values)
    if (v.labels.method === "Finish") handled[String(v.labels.code)] = v.value;
  const open = (await server.metrics.rpcStreamsOpen.get()).values.find((v) => v.labels.method === "Finish");
  return { handled, open: open?.value ?? 0 };
}

async function until(what: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!what() && Date.now() < end) await sleep(10);
}

describe("a stream's declared last message (platform.api.v1.last_message)", () => {
  const { server, probe } = testServer();
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("plain gRPC: the OK status comes with it; the handler's teardown runs after, uncancelled, and counts OK", async () => {
    let release!: () => void;
    probe.teardown = new Promise((r) => {
      release = r;
    });
    try {
      const answered = await Promise.race([finish(url, { chunks: ["a", "b"] }), sleep(3_000, undefined)]);
      assert.ok(answered, "the status waited for the handler's teardown");
      assert.equal(answered.status, "0");
      assert.deepEqual(
        answered.messages.map((m) => m.event.case),
        ["text", "text", "done"],
      );
      assert.equal(probe.calls.get("finish ended"), undefined, "the teardown had not run yet");
      // Counted when the handler ends, not before.
      assert.deepEqual((await finishMetrics(server)).handled, {});
    } finally {
      release();
      probe.teardown = undefined;
    }
    await until(() => probe.calls.get("finish ended") === 1);
    assert.equal(probe.calls.get("finish ended"), 1, "the handler's finally ran");
    assert.ok(!probe.aborted.has("finish"), "the handler's signal aborted: its teardown saw a cancel");
    const m = await finishMetrics(server);
    assert.deepEqual(m.handled, { OK: 1 });
    assert.equal(m.open, 0);
  });

  test("a failure or a message after it does not reach the client, which has its status; the failure is counted", async () => {
    const failed = await finish(url, { failAfter: "provider went away" });
    assert.equal(failed.status, "0");
    assert.deepEqual(
      failed.messages.map((m) => m.event.case),
      ["done"],
    );
    const extra = await finish(url, { extraAfter: true });
    assert.equal(extra.status, "0");
    assert.deepEqual(
      extra.messages.map((m) => m.event.case),
      ["done"],
    );
    await until(() => probe.calls.get("finish ended") === 3);
    const m = await finishMetrics(server);
    assert.equal(m.handled.UNAVAILABLE, 1);
    assert.equal(m.open, 0);
  });

  test("a shutdown waits for the teardown after the last message, and does not cancel it", async () => {
    const { server: s2, probe: p2 } = testServer();
    const u = (await s2.listen()).url;
    let release!: () => void;
    p2.teardown = new Promise((r) => {
      release = r;
    });
    assert.equal((await finish(u, {})).status, "0");
    let closed = false;
    const closing = s2.close().then(() => {
      closed = true;
    });
    await sleep(200);
    assert.equal(closed, false, "the server closed with a handler's teardown still running");
    release();
    await closing;
    assert.equal(p2.calls.get("finish ended"), 1);
    assert.ok(!p2.aborted.has("finish"), "the shutdown cancelled the teardown");
  });

  test("Connect's protocols end the stream with the handler, as before", async () => {
    const client = createClient(StreamService, createConnectTransport({ baseUrl: url, httpVersion: "2" }));
    const seen: string[] = [];
    for await (const m of client.finish({ chunks: ["x"] })) seen.push(m.event.case ?? "");
    assert.deepEqual(seen, ["text", "done"]);
  });

  test("the option names oneof variants of the streamed message; a message setting one is last", () => {
    const isLast = lastMessageOf(StreamService.method.finish);
    assert.ok(isLast);
    assert.equal(isLast(create(FinishResponseSchema, { event: { case: "done", value: {} } })), true);
    assert.equal(isLast(create(FinishResponseSchema, { event: { case: "text", value: { content: "" } } })), false);
    assert.equal(lastMessageOf(StreamService.method.chat), undefined);
  });
});
