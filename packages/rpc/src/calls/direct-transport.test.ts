import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  createClient,
  createContextKey,
  createContextValues,
  type Interceptor,
  type ServiceImpl,
} from "@connectrpc/connect";
import { PlatformError } from "@platform/errors";
import {
  ChatRequestSchema,
  EchoRequestSchema,
  LibraryService,
  SleepRequestSchema,
  StreamService,
  TickRequestSchema,
} from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import { fromConnectError } from "../errors.ts";
import { createDirectTransport } from "./direct-transport.ts";
import { oneMessage } from "./one-message.ts";
import { parkableOf, type Waiter } from "./parkable.ts";
import { errorInterceptor } from "../server/interceptors.ts";
import { inputGuard } from "../server/input-guard.ts";
import { CallController } from "../http/adopt.ts";
import { ShutdownHooks } from "../http/shutdown-hooks.ts";

const tag = createContextKey("none");

function transportWith(
  library: Partial<ServiceImpl<typeof LibraryService>>,
  stream: Partial<ServiceImpl<typeof StreamService>> = {},
  interceptors: Interceptor[] = [],
) {
  return createDirectTransport({
    services: [
      { service: LibraryService, impl: library },
      { service: StreamService, impl: stream },
    ],
    interceptors: [errorInterceptor(pino({ level: "silent" })), ...interceptors],
    contextValues: () => createContextValues().set(tag, "from-server"),
  });
}

/** Opens `t`'s tick stream with its one (empty) request; the call's output. */
function openTick(t: ReturnType<typeof createDirectTransport>, signal?: AbortSignal) {
  return t.stream(
    StreamService.method.tick,
    signal,
    undefined,
    undefined,
    (async function* () {
      yield create(TickRequestSchema, {});
    })(),
  );
}

describe("direct transport (REST routes → implementations)", () => {
  test("interceptors run outermost first around the handler, with the call's headers and context values", async () => {
    const order: string[] = [];
    const mark =
      (name: string): Interceptor =>
      (next) =>
      async (req) => {
        order.push(`${name}:${req.header.get("x-custom")}:${req.contextValues.get(tag)}`);
        return next(req);
      };
    const t = transportWith(
      {
        echo(req, ctx) {
          order.push("handler");
          ctx.responseHeader.set("x-answer", "42");
          return { text: req.text.toUpperCase() };
        },
      },
      {},
      [mark("a"), mark("b")],
    );
    const res = await t.unary(
      LibraryService.method.echo,
      undefined,
      undefined,
      { "x-custom": "hi" },
      create(EchoRequestSchema, { text: "abc" }),
    );
    assert.equal(res.message.text, "ABC");
    assert.equal(res.header.get("x-answer"), "42");
    assert.deepEqual(order, ["a:hi:from-server", "b:hi:from-server", "handler"]);
  });

  test("a deadline fails the call even when the handler ignores its signal", async () => {
    let seen: AbortSignal | undefined;
    const t = transportWith({
      sleep(_req, ctx) {
        seen = ctx.signal;
        return new Promise(() => {});
      },
    });
    const err = await t
      .unary(LibraryService.method.sleep, undefined, 30, undefined, create(SleepRequestSchema, { ms: 10_000n }))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof ConnectError);
    assert.equal(err.code, Code.DeadlineExceeded);
    assert.equal(seen?.aborted, true);
  });

  test("a plain unary call defines accessors on two objects, its request and its one response: its context's are its class's", async () => {
    const t = transportWith({
      echo(req, ctx) {
        ctx.responseHeader.set("x-seen", ctx.requestHeader.get("x-in") ?? "");
        return { text: req.text };
      },
    });
    const original = Object.defineProperties;
    let defined = 0;
    Object.defineProperties = ((o: object, p: PropertyDescriptorMap) => {
      defined++;
      return original(o, p);
    }) as typeof Object.defineProperties;
    let res: Awaited<ReturnType<typeof t.unary>>;
    try {
      res = await t.unary(
        LibraryService.method.echo,
        undefined,
        undefined,
        { "x-in": "a" },
        create(EchoRequestSchema, { text: "x" }),
      );
    } finally {
      Object.defineProperties = original;
    }
    assert.equal(defined, 2, "4 when the context defined its own and the answer was copied");
    assert.equal((res.message as { text?: string }).text, "x");
    assert.equal(res.header.get("x-seen"), "a");
  });

  test("a unary call given its caller's CallController (unaryWith) makes no signal unless asked: the caller's abort still fails it, and a handler that reads its signal gets the call's", async () => {
    const seen: AbortSignal[] = [];
    let passedOn: AbortSignal | undefined;
    const t = transportWith(
      {
        echo(req, ctx) {
          if (req.text === "read") seen.push(ctx.signal);
          return { text: req.text };
        },
        sleep() {
          return new Promise(() => {});
        },
      },
      {},
      [
        (next) => (req) => {
          if (req.header.get("x-own-signal") === null) return next(req);
          passedOn = AbortSignal.any([req.signal]);
          return next({ ...req, signal: passedOn });
        },
      ],
    );
    const echo = (controller: CallController, text: string, header?: Record<string, string>) =>
      t.unaryWith(LibraryService.method.echo, controller, undefined, header, create(EchoRequestSchema, { text }));

    const quiet = new CallController();
    assert.equal(((await echo(quiet, "quiet")).message as unknown as { text: string }).text, "quiet");
    assert.equal(quiet.signalMade, false, "nobody asked for the signal");
    assert.equal(quiet.aborted, true, "the call's end aborts it");
    assert.equal((quiet.reason as ConnectError).code, Code.Canceled);
    assert.equal(quiet.signal.aborted, true, "asked for after the end: aborted already");

    const reading = new CallController();
    await echo(reading, "read");
    assert.equal(seen[0], reading.signal);
    assert.equal(seen[0]?.aborted, true);

    // An interceptor's own signal reaches the handler in place of the call's.
    await echo(new CallController(), "read", { "x-own-signal": "1" });
    assert.ok(passedOn);
    assert.equal(seen[1], passedOn);

    // A caller gone: the pending call fails with its reason though nothing listens to a signal.
    const gone = new CallController();
    const pending = t
      .unaryWith(LibraryService.method.sleep, gone, undefined, undefined, create(SleepRequestSchema, { ms: 10_000n }))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    await new Promise((r) => setImmediate(r));
    gone.abort(new ConnectError("client went away", Code.Canceled));
    const err = await pending;
    assert.ok(err instanceof ConnectError);
    assert.equal(err.code, Code.Canceled);
    assert.equal(gone.signalMade, false);
  });

  test("a call's signal aborts once it ends (a unary answer, a stream's last message); a second call on the same transport is unaffected", async () => {
    const signals: AbortSignal[] = [];
    const t = transportWith(
      {
        echo(req, ctx) {
          signals.push(ctx.signal);
          return { text: req.text };
        },
      },
      {
        async *tick(req, ctx) {
          signals.push(ctx.signal);
          for (let i = 1; i <= req.count; i++) yield { seq: BigInt(i) };
        },
      },
    );
    const library = createClient(LibraryService, t);
    const streams = createClient(StreamService, t);
    for (const text of ["a", "b"]) {
      assert.equal((await library.echo({ text })).text, text);
      const seqs: bigint[] = [];
      for await (const m of streams.tick({ count: 2 })) seqs.push(m.seq);
      assert.deepEqual(seqs, [1n, 2n]);
    }
    assert.equal(signals.length, 4);
    for (const signal of signals) {
      assert.equal(signal.aborted, true);
      assert.ok(signal.reason instanceof ConnectError);
      assert.equal(signal.reason.code, Code.Canceled);
    }
  });

  test("a server stream's one message passes the input guard and reaches its handler in the turn of the first read", async () => {
    // The direct gRPC and REST paths hand the transport oneMessage's stream: the guard and the innermost step
    // take the message from it without an await (two turns of the microtask queue on every stream's start).
    const handled: string[][] = [];
    const t = transportWith(
      {},
      {
        chat(req) {
          handled.push(req.chunks);
          return (async function* () {
            for (const content of req.chunks) yield { event: { case: "text" as const, value: { content } } };
          })();
        },
      },
      [inputGuard()],
    );
    const open = (chunks: string[]) =>
      t.stream(
        StreamService.method.chat,
        undefined,
        undefined,
        undefined,
        oneMessage(create(ChatRequestSchema, { chunks })) as never,
      );
    const res = await open(["a", "b"]);
    const it = (res.message as AsyncIterable<{ event: { value?: { content?: string } } }>)[Symbol.asyncIterator]();
    const first = it.next();
    assert.deepEqual(handled, [["a", "b"]], "the handler runs in the turn of the first read");
    assert.equal((await first).value?.event.value?.content, "a");
    assert.equal((await it.next()).value?.event.value?.content, "b");
    assert.equal((await it.next()).done, true);
    // A refused string still fails the call before its handler starts.
    const refused = await open(["ok", "x\0"]);
    await assert.rejects(
      refused.message[Symbol.asyncIterator]().next(),
      (e) => e instanceof ConnectError && e.code === Code.InvalidArgument && /U\+0000/.test(e.message),
    );
    assert.equal(handled.length, 1);
  });

  test("a domain error keeps its reason, and headers set before it travel as metadata", async () => {
    const t = transportWith({
      getShelf(_req, ctx) {
        ctx.responseHeader.set("retry-after", "5");
        throw PlatformError.unavailable("busy", "shelf_busy");
      },
    });
    const err = await t
      .unary(
        LibraryService.method.getShelf,
        undefined,
        undefined,
        undefined,
        create(LibraryService.method.getShelf.input),
      )
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof ConnectError);
    assert.equal(err.metadata.get("retry-after"), "5");
    const p = fromConnectError(err);
    assert.equal(p.reason, "shelf_busy");
    assert.equal(p.code, Code.Unavailable);
  });

  test("giving up a stream aborts the handler's signal; a stream read fails when its call is aborted", async () => {
    const signals: AbortSignal[] = [];
    const t = transportWith(
      {},
      {
        async *tick(_req, ctx) {
          signals.push(ctx.signal);
          yield { seq: 1n };
          // Ignores its signal on purpose.
          await new Promise(() => {});
        },
      },
    );
    const abort = new AbortController();
    const res = await openTick(t, abort.signal);
    const it = res.message[Symbol.asyncIterator]();
    assert.equal((await it.next()).value?.seq, 1n);
    const pending = it.next();
    abort.abort(new ConnectError("client went away", Code.Canceled));
    await assert.rejects(pending, (e: unknown) => e instanceof ConnectError && e.code === Code.Canceled);
    assert.equal(signals[0]?.aborted, true);

    const second = await openTick(t);
    const it2 = second.message[Symbol.asyncIterator]();
    await it2.next();
    await it2.return?.();
    assert.equal(signals[1]?.aborted, true);
    assert.deepEqual(await it2.next(), { done: true, value: undefined });
  });

  test("giving up a started stream closes the handler's stream (its finally runs) and ends the call", async () => {
    const signals: AbortSignal[] = [];
    let closed = 0;
    const t = transportWith(
      {},
      {
        async *tick(_req, ctx) {
          signals.push(ctx.signal);
          try {
            yield { seq: 1n };
            yield { seq: 2n };
          } finally {
            closed++;
          }
        },
      },
    );
    const res = await openTick(t);
    const it = res.message[Symbol.asyncIterator]();
    assert.equal((await it.next()).value?.seq, 1n);
    assert.equal(closed, 0);
    assert.deepEqual(await it.return?.(), { done: true, value: undefined });
    assert.equal(closed, 1, "the handler's generator was closed");
    assert.equal(signals[0]?.aborted, true);
    assert.deepEqual(await it.next(), { done: true, value: undefined });
  });

  test("parked on a stream that watches its own signal (endsOnAbort), the call keeps no abort listener; the abort still wakes the reader, and a read in flight then fails with its reason", async () => {
    /** One item, then reads that wait for release(); its own abort listener wakes a parked waiter. */
    class OwnAbortStream {
      reads = 0;
      waiter: Waiter | undefined;
      release: (() => void) | undefined;
      constructor(readonly signal: AbortSignal) {
        signal.addEventListener("abort", () => this.wake(), { once: true });
      }
      [Symbol.asyncIterator]() {
        return this;
      }
      wake(): void {
        const w = this.waiter;
        this.waiter = undefined;
        w?.wake();
      }
      park(waiter: Waiter): boolean {
        if (this.signal.aborted) return false;
        this.waiter = waiter;
        return true;
      }
      endsOnAbort(signal: AbortSignal): boolean {
        return signal === this.signal;
      }
      next(): Promise<IteratorResult<{ seq: bigint }>> {
        const seq = BigInt(++this.reads);
        if (seq === 1n) return Promise.resolve({ done: false, value: { seq } });
        // An item on its way, delivered when released (after the abort below).
        return new Promise((resolve) => (this.release = () => resolve({ done: false, value: { seq } })));
      }
      async return(): Promise<IteratorResult<{ seq: bigint }>> {
        return { done: true, value: undefined };
      }
    }
    const streams: OwnAbortStream[] = [];
    // No interceptor: one that wraps a stream (errorInterceptor) hides whether it can park.
    const t = createDirectTransport({
      services: [
        {
          service: StreamService,
          impl: {
            tick: ((_req: unknown, ctx: { signal: AbortSignal }) => {
              const s = new OwnAbortStream(ctx.signal);
              streams.push(s);
              return s;
            }) as never,
          },
        },
      ],
      interceptors: [],
      contextValues: () => createContextValues(),
    });
    const open = async (caller: AbortController) => {
      const res = await openTick(t, caller.signal);
      const it = res.message[Symbol.asyncIterator]();
      assert.equal((await it.next()).value?.seq, 1n);
      return it;
    };

    // Parked: the stream's listener is the only one on the call's signal, and the abort wakes the reader through it.
    const first = new AbortController();
    const it = await open(first);
    let woken = 0;
    assert.equal(parkableOf(it)?.park({ wake: () => woken++ }), true);
    const s = streams[0]!;
    assert.equal(getEventListeners(s.signal, "abort").length, 1, "the stream's own listener only");
    first.abort(new ConnectError("client went away", Code.Canceled));
    assert.equal(woken, 1, "the abort woke the parked reader");
    await assert.rejects(it.next(), (e: unknown) => e instanceof ConnectError && e.code === Code.Canceled);

    // Woken by an item, reading when the abort comes: the read fails with the abort's reason, not the item
    // that arrives after it (as the call's own listener would have failed it).
    const second = new AbortController();
    const it2 = await open(second);
    assert.equal(parkableOf(it2)?.park({ wake: () => {} }), true);
    const s2 = streams[1]!;
    s2.wake();
    const pending = it2.next();
    second.abort(new ConnectError("client went away", Code.Canceled));
    s2.release!();
    await assert.rejects(pending, (e: unknown) => e instanceof ConnectError && e.code === Code.Canceled);
    assert.equal(s2.signal.aborted, true);
  });

  test("works as a client transport", async () => {
    const client = createClient(LibraryService, transportWith({ echo: (req) => ({ text: req.text }) }));
    assert.equal((await client.echo({ text: "x" })).text, "x");
  });
});

describe("ShutdownHooks", () => {
  test("fires registered hooks once, not unregistered ones, and late ones at once", () => {
    const hooks = new ShutdownHooks();
    const fired: string[] = [];
    hooks.add(() => fired.push("a"));
    const off = hooks.add(() => fired.push("b"));
    off();
    hooks.fire();
    hooks.fire();
    hooks.add(() => fired.push("late"));
    assert.deepEqual(fired, ["a", "late"]);
  });
});
