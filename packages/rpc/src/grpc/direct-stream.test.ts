import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { StreamService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { createServiceTransport } from "../client.ts";
import { streamCall } from "../stream-call.ts";
import { testServer } from "../testing/fixture.ts";
import { promisesPerItem } from "../testing/promise-count.ts";

// Server streams of `direct` methods read by grpc/direct-stream.ts (the
// router's Invoke to a tenant worker, the worker's SendMessages to agents):
// the messages, statuses, headers and cancellation of Connect's client, at
// one promise or so a message.
describe("createServiceTransport with direct server streams", () => {
  const { server, probe } = testServer();
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  const tick = StreamService.method.tick;
  const transport = () => createServiceTransport({ baseUrl: url, direct: [tick] });
  const read = async (it: AsyncIterable<{ seq: bigint }>) => {
    const seqs: bigint[] = [];
    for await (const m of it) seqs.push(m.seq);
    return seqs;
  };

  test("every message in order, the response headers first", async () => {
    let header: Headers | undefined;
    const seqs = await read(
      streamCall(transport(), tick, { count: 300, after: 5n }, { onHeader: (h) => (header = h) }),
    );
    assert.equal(seqs.length, 300);
    assert.deepEqual(seqs.slice(0, 2), [6n, 7n]);
    assert.equal(seqs.at(-1), 305n);
    assert.ok(header?.get("content-type")?.startsWith("application/grpc"));
  });

  test("a failure before the first message (trailers-only) and one midway arrive with their codes", async () => {
    const first = await read(streamCall(transport(), tick, { failFirst: true, count: 3 })).catch((e: unknown) =>
      ConnectError.from(e),
    );
    assert.equal((first as ConnectError).code, Code.NotFound);
    assert.equal((first as ConnectError).rawMessage, "no such stream");
    const seqs: bigint[] = [];
    const mid = await (async () => {
      for await (const m of streamCall(transport(), tick, { count: 10, failAfter: 4 })) seqs.push(m.seq);
    })().catch((e: unknown) => ConnectError.from(e));
    assert.deepEqual(seqs, [1n, 2n, 3n, 4n]);
    assert.equal((mid as ConnectError).code, Code.Unavailable);
  });

  test("an abort ends the call as canceled and the handler sees it; an unreachable server is unavailable", async () => {
    const abort = new AbortController();
    const seqs: bigint[] = [];
    const ended = (async () => {
      for await (const m of streamCall(transport(), tick, { hang: true, intervalMs: 5 }, { signal: abort.signal })) {
        seqs.push(m.seq);
        if (seqs.length === 3) abort.abort();
      }
    })().catch((e: unknown) => ConnectError.from(e));
    assert.equal(((await ended) as ConnectError).code, Code.Canceled);
    assert.equal(await probe.nextAbort(), "tick");
    const nowhere = createServiceTransport({ baseUrl: "http://127.0.0.1:1", direct: [tick] });
    const down = await read(streamCall(nowhere, tick, { count: 1 })).catch((e: unknown) => ConnectError.from(e));
    assert.equal((down as ConnectError).code, Code.Unavailable);
  });

  test("large messages arrive whole, each frame copied once (not the message so far again per frame)", async () => {
    const chat = StreamService.method.chat;
    const sizes = [600 << 10, 10, 100 << 10, 300 << 10, 1];
    const chunks = sizes.map((n, i) => String.fromCharCode(97 + i).repeat(n));
    const total = sizes.reduce((a, b) => a + b, 0);
    // Bytes made by Buffer.concat and Buffer.from in this process (the server's side included) while reading.
    let copied = 0;
    const { concat, from } = Buffer;
    Buffer.concat = ((list: readonly Uint8Array[], length?: number) => {
      const b = concat(list, length);
      copied += b.length;
      return b;
    }) as typeof Buffer.concat;
    Buffer.from = ((...args: Parameters<typeof Buffer.from>) => {
      const b = (from as (...a: unknown[]) => Buffer)(...args);
      copied += b.length;
      return b;
    }) as typeof Buffer.from;
    const got: string[] = [];
    try {
      const it = streamCall(createServiceTransport({ baseUrl: url, direct: [chat] }), chat, { chunks });
      for await (const m of it) if (m.event.case === "text") got.push(m.event.value.content);
    } finally {
      Buffer.concat = concat;
      Buffer.from = from;
    }
    // The fixture's chat ends with a text of its own after its done.
    assert.equal(got.length, sizes.length + 1, "every text message");
    assert.ok(
      chunks.every((c, i) => got[i] === c),
      "every message whole and in order",
    );
    // Joining each 16 KiB frame to the message so far copied ~25 MiB here.
    assert.ok(copied < total, `${copied} bytes copied for ${total} received`);
  });

  test("a message costs the reader a few promises, not Connect's pipeline of generators", async () => {
    // Promises made in this process while a stream of n messages is read, server side included.
    const perMessage = await promisesPerItem(async (n) => {
      assert.equal((await read(streamCall(transport(), tick, { count: n }))).length, n);
    });
    // The server's handler (an async generator through the direct transport) makes most of these;
    // Connect's client added ~18 a message on top (28 in all).
    assert.ok(perMessage < 15, `${perMessage} promises a message`);
  });
});
