import assert from "node:assert/strict";
import * as http from "node:http";
import { after, before, test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { StreamService, type TickRequest, TickResponseSchema } from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import type { Waiter } from "../calls/parkable.ts";
import { createServer } from "../server/create-server.ts";

// What an open, idle SSE stream keeps of its request: the memory of
// thousands of idle followers (bench sse-streams) is mostly what each one
// holds while it waits. The request message (with the path, query and body
// it was built from) is read once; a suspended layer of the bridge holding it
// (an async function awaiting the stream, a generator over the one message)
// would keep it, and everything beside it, for the stream's life.

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const requests: WeakRef<TickRequest>[] = [];
const contexts: HandlerContext[] = [];
/** The request headers each stream's handler got, and the x-probe it read from them as it opened. */
const headers: WeakRef<Headers>[] = [];
const probes: (string | null)[] = [];

/** One event, then nothing until the client goes: an idle follower. Holds its context, not its request. */
function idleStream(req: TickRequest, ctx: HandlerContext): AsyncIterable<unknown> {
  requests.push(new WeakRef(req));
  contexts.push(ctx);
  headers.push(new WeakRef(ctx.requestHeader));
  probes.push(ctx.requestHeader.get("x-probe"));
  return openThenIdle(ctx.signal);
}

/** The stream of an idle follower: one event, then nothing until `signal` aborts. */
function openThenIdle(signal: AbortSignal): AsyncIterable<unknown> {
  let sent = false;
  return {
    [Symbol.asyncIterator]: () => ({
      next: () => {
        if (!sent) {
          sent = true;
          return Promise.resolve({ done: false, value: create(TickResponseSchema, { seq: 1n, text: "open" }) });
        }
        return new Promise((resolve) =>
          signal.addEventListener("abort", () => resolve({ done: true, value: undefined }), { once: true }),
        );
      },
    }),
  };
}

const server = createServer({
  name: "sse-idle",
  envelope: "agents",
  services: [{ service: StreamService, impl: { tick: idleStream as never, chat: idleStream as never } }],
  logger: pino({ level: "silent" }),
});
let port = 0;
before(async () => {
  port = Number(new URL((await server.listen()).url).port);
});
after(() => server.close());

/** Opens a stream and resolves once its first event arrived; the request stays open. */
function open(path: string, extra: Record<string, string> = {}): Promise<http.ClientRequest> {
  return new Promise((resolve, reject) => {
    const req = http.get({ port, path, headers: { accept: "text/event-stream", ...extra } }, (res) => {
      assert.equal(res.statusCode, 200);
      res.once("data", () => resolve(req));
    });
    req.on("error", reject);
  });
}

test("an open SSE stream waiting for its next event does not hold its request message", async () => {
  const clients = await Promise.all(Array.from({ length: 5 }, (_, i) => open(`/v1/ticks?count=${i + 1}&after=7`)));
  try {
    assert.equal(requests.length, 5);
    // Collected across turns: a finalizer-free WeakRef clears after the job it was made in.
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setImmediate(r));
      gc();
    }
    const kept = requests.filter((r) => r.deref() !== undefined).length;
    assert.equal(kept, 0, `${kept} of 5 idle streams still hold their request message`);
    assert.ok(
      contexts.every((c) => !c.signal.aborted),
      "the streams are still open",
    );
  } finally {
    for (const c of clients) c.destroy();
  }
});

test("an open SSE stream's call lets go of its request headers once open; its handler read them as it opened", async () => {
  const from = headers.length;
  const clients = await Promise.all(
    Array.from({ length: 5 }, (_, i) => open(`/v1/ticks?count=${i + 1}`, { "x-probe": `probe-${i}` })),
  );
  try {
    assert.deepEqual(
      probes.slice(from).sort(),
      ["probe-0", "probe-1", "probe-2", "probe-3", "probe-4"],
      "each handler read its request's header as it opened",
    );
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setImmediate(r));
      gc();
    }
    const kept = headers.slice(from).filter((h) => h.deref() !== undefined).length;
    assert.equal(kept, 0, `${kept} of 5 idle streams still hold their request headers`);
    const late = contexts.slice(from);
    assert.ok(
      late.every((c) => !c.signal.aborted && c.requestHeader.get("x-probe") === null),
      "the streams are still open; a read of the headers now finds none",
    );
  } finally {
    for (const c of clients) c.destroy();
  }
});

/** A stream that parks (Parkable): the relay's reads and parks of it, and its waiter. */
class ParkingStream {
  reads = 0;
  parks = 0;
  returned = false;
  waiter: Waiter | undefined;
  readonly #items: number[] = [1];
  constructor(readonly ctx: HandlerContext) {}
  [Symbol.asyncIterator]() {
    return this;
  }
  /** An item for the waiting client: the parked relay is woken for it. */
  push(seq: number): void {
    this.#items.push(seq);
    const w = this.waiter;
    this.waiter = undefined;
    w?.wake();
  }
  park(waiter: Waiter): boolean {
    this.parks++;
    if (this.#items.length > 0) return false;
    this.waiter = waiter;
    return true;
  }
  next(): Promise<IteratorResult<unknown>> {
    this.reads++;
    const seq = this.#items.shift();
    if (seq !== undefined)
      return Promise.resolve({ done: false, value: create(TickResponseSchema, { seq: BigInt(seq), text: "t" }) });
    // Read without a park: waits for the client to go.
    return new Promise((resolve) =>
      this.ctx.signal.addEventListener("abort", () => resolve({ done: true, value: undefined }), { once: true }),
    );
  }
  async return(): Promise<IteratorResult<unknown>> {
    this.returned = true;
    return { done: true, value: undefined };
  }
}

test("an idle SSE stream that can park waits on its waiter, with no read pending; woken, it relays; its client gone, the call ends", async () => {
  const streams: ParkingStream[] = [];
  const parking = createServer({
    name: "sse-park",
    envelope: "agents",
    services: [
      {
        service: StreamService,
        impl: {
          tick: ((_req: TickRequest, ctx: HandlerContext) => {
            const s = new ParkingStream(ctx);
            streams.push(s);
            return s;
          }) as never,
          chat: idleStream as never,
        },
      },
    ],
    logger: pino({ level: "silent" }),
  });
  const parkPort = Number(new URL((await parking.listen()).url).port);
  try {
    const received: string[] = [];
    let closed!: () => void;
    const gone = new Promise<void>((r) => (closed = r));
    const client = await new Promise<http.ClientRequest>((resolve, reject) => {
      const req = http.get({ port: parkPort, path: "/v1/ticks", headers: { accept: "text/event-stream" } }, (res) => {
        assert.equal(res.statusCode, 200);
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          received.push(d);
          resolve(req);
        });
        res.on("close", closed);
      });
      req.on("error", reject);
    });
    const s = streams[0]!;
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    assert.match(received.join(""), /id: 1\n/);
    assert.equal(s.reads, 1, "the first read only: the idle stream waits parked, not on a pending read");
    assert.ok(s.waiter, "the relay parked on the stream");
    s.push(2);
    for (let i = 0; i < 50 && !/id: 2\n/.test(received.join("")); i++) await new Promise((r) => setTimeout(r, 5));
    assert.match(received.join(""), /id: 2\n/, "woken, the relay read and sent the next event");
    assert.equal(s.reads, 2);
    assert.ok(s.waiter, "and parked again");
    client.destroy();
    await gone;
    for (let i = 0; i < 50 && !s.returned; i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(s.ctx.signal.aborted, "the client gone aborts the parked call");
    assert.ok(s.returned, "and the stream is closed");
  } finally {
    await parking.close();
  }
});

test("an open SSE stream's call lets go of its handler's context and values; the client gone still aborts the call", async () => {
  const contextRefs: WeakRef<HandlerContext>[] = [];
  const valueRefs: WeakRef<object>[] = [];
  const signals: AbortSignal[] = [];
  /** One event, then nothing until its signal aborts: keeps its signal, not its context. */
  function signalOnly(_req: TickRequest, ctx: HandlerContext): AsyncIterable<unknown> {
    contextRefs.push(new WeakRef(ctx));
    valueRefs.push(new WeakRef(ctx.values));
    const { signal } = ctx;
    signals.push(signal);
    return openThenIdle(signal);
  }
  const lean = createServer({
    name: "sse-lean",
    envelope: "agents",
    services: [{ service: StreamService, impl: { tick: signalOnly as never, chat: signalOnly as never } }],
    logger: pino({ level: "silent" }),
  });
  const leanPort = Number(new URL((await lean.listen()).url).port);
  const clients: http.ClientRequest[] = [];
  try {
    for (let i = 0; i < 5; i++) {
      clients.push(
        await new Promise<http.ClientRequest>((resolve, reject) => {
          const req = http.get(
            { port: leanPort, path: `/v1/ticks?count=${i + 1}`, headers: { accept: "text/event-stream" } },
            (res) => {
              assert.equal(res.statusCode, 200);
              res.once("data", () => resolve(req));
            },
          );
          req.on("error", reject);
        }),
      );
    }
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setImmediate(r));
      gc();
    }
    assert.equal(signals.length, 5);
    assert.ok(
      signals.every((s) => !s.aborted),
      "the streams are still open",
    );
    const keptContexts = contextRefs.filter((r) => r.deref() !== undefined).length;
    const keptValues = valueRefs.filter((r) => r.deref() !== undefined).length;
    assert.equal(keptContexts, 0, `${keptContexts} of 5 idle streams' calls still hold their handler's context`);
    assert.equal(keptValues, 0, `${keptValues} of 5 idle streams still hold their context values`);
    for (const c of clients) c.destroy();
    for (let i = 0; i < 100 && !signals.every((s) => s.aborted); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(
      signals.every((s) => s.aborted),
      "each client gone aborts its call",
    );
  } finally {
    for (const c of clients) c.destroy();
    await lean.close();
  }
});
