import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ConnectError, type StreamRequest, type StreamResponse } from "@connectrpc/connect";
import { StreamService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import { CallValues } from "../calls/call-values.ts";
import { callEnded } from "../calls/direct-transport.ts";
import { ServerMetrics } from "../metrics/server-metrics.ts";
import { callOutcomeInterceptor } from "./call-outcome.ts";

/** platform_rpc_server_handled_total of Tick by code. */
async function handled(metrics: ServerMetrics): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await metrics.rpcHandled.get()).values) out[String(v.labels.code)] = v.value;
  return out;
}

/** A Tick stream through the interceptor: one item, then a read that ends (done) once `end()` is called. */
async function tick(metrics: ServerMetrics, signal: AbortSignal) {
  let end!: () => void;
  let reads = 0;
  const source = {
    [Symbol.asyncIterator]() {
      return this;
    },
    next(): Promise<IteratorResult<unknown>> {
      if (++reads === 1) return Promise.resolve({ done: false, value: {} });
      return new Promise((resolve) => (end = () => resolve({ done: true, value: undefined })));
    },
  };
  const next = (async (req: StreamRequest) => ({ stream: true, message: source, method: req.method })) as never;
  const req = {
    stream: true,
    method: StreamService.method.tick,
    signal,
    contextValues: new CallValues(),
  } as unknown as StreamRequest;
  const res = (await callOutcomeInterceptor(metrics, "test", pino({ level: "silent" }))(next)(req)) as StreamResponse;
  const it = res.message[Symbol.asyncIterator]();
  await it.next();
  return { it, end: () => end() };
}

test("a stream that ends once its caller aborted it (a client gone) counts CANCELLED, one that ends by itself OK", async () => {
  const metrics = new ServerMetrics();
  // The follow of an idle SSE stream ends (done) when its signal aborts; the read sees the end, not a failure.
  const gone = new AbortController();
  const a = await tick(metrics, gone.signal);
  const read = a.it.next();
  gone.abort(new ConnectError("client went away", Code.Canceled));
  a.end();
  assert.deepEqual(await read, { done: true, value: undefined });
  assert.deepEqual(await handled(metrics), { CANCELLED: 1 });

  // Its own end (the transport's callEnded is the call's end, not its caller's) is OK.
  const ended = new AbortController();
  const b = await tick(metrics, ended.signal);
  const last = b.it.next();
  b.end();
  assert.deepEqual(await last, { done: true, value: undefined });
  ended.abort(callEnded);
  assert.deepEqual(await handled(metrics), { CANCELLED: 1, OK: 1 });
});
