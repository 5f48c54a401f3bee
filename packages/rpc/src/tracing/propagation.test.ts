import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { ServiceImpl } from "@connectrpc/connect";
import { LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import { createServiceTransport } from "../client.ts";
import { createServer } from "../server/create-server.ts";
import { createProbe, libraryImpl } from "../testing/fixture.ts";
import { OtlpReceiver, type ReceivedSpan } from "../testing/otlp-receiver.ts";
import { inWorkSpan } from "./spans.ts";
import { flushTracing, startTracing, type Tracing } from "./start.ts";

const SERVER = 2;
const CLIENT = 3;

/**
 * Two in-process servers, front and back: front's Echo calls back's Echo over
 * gRPC (createServiceTransport) inside a work span. One request to front
 * must make one trace: front's server span (continuing the caller's
 * traceparent) → the work span → front's client span → back's server span.
 */
describe("trace propagation across createServer and createServiceTransport", () => {
  const receiver = new OtlpReceiver();
  let tracing: Tracing;
  const seenByBack: (string | null)[] = [];
  const logger = pino({ level: "silent" });
  const backImpl: ServiceImpl<typeof LibraryService> = {
    ...libraryImpl(createProbe()),
    echo(req, ctx) {
      seenByBack.push(ctx.requestHeader.get("traceparent"));
      return { text: `back:${req.text}` };
    },
  };
  let backUrl = "";
  const frontImpl: ServiceImpl<typeof LibraryService> = {
    ...libraryImpl(createProbe()),
    async echo(req) {
      const client = createClient(LibraryService, createServiceTransport({ baseUrl: backUrl }));
      return inWorkSpan("front work", { "test.step": 1 }, () => client.echo({ text: req.text }));
    },
  };
  const back = createServer({
    name: "back",
    envelope: "agents",
    logger,
    services: [{ service: LibraryService, impl: backImpl }],
  });
  const front = createServer({
    name: "front",
    envelope: "agents",
    logger,
    services: [{ service: LibraryService, impl: frontImpl }],
  });
  let frontUrl = "";

  before(async () => {
    tracing = await startTracing({ serviceName: "propagation-test", endpoint: `${await receiver.start()}/` });
    backUrl = (await back.listen()).url;
    frontUrl = (await front.listen()).url;
  });
  after(async () => {
    await tracing.shutdown();
    await front.close();
    await back.close();
    await receiver.stop();
  });

  /** The spans of `traceId` once the chain of four has arrived. */
  async function chainOf(traceId: string): Promise<ReceivedSpan[]> {
    await flushTracing();
    await receiver.until((spans) => spans.filter((s) => s.traceId === traceId).length >= 4, 15_000);
    return receiver.trace(traceId);
  }

  function assertChain(spans: ReceivedSpan[], callerSpanId: string) {
    const frontServer = spans.find((s) => s.kind === SERVER && s.parentSpanId === callerSpanId);
    assert.ok(frontServer, `front's server span is the caller's child: ${JSON.stringify(spans)}`);
    const work = spans.find((s) => s.name === "front work");
    assert.equal(work?.parentSpanId, frontServer.spanId, "the work span is a child of front's server span");
    const client = spans.find((s) => s.kind === CLIENT);
    assert.equal(client?.name, "rpctest.v1.LibraryService/Echo");
    assert.equal(client.parentSpanId, work.spanId, "the client span is a child of the work span");
    const backServer = spans.find((s) => s.kind === SERVER && s !== frontServer);
    assert.equal(backServer?.name, "rpctest.v1.LibraryService/Echo");
    assert.equal(backServer.parentSpanId, client.spanId, "back's server span is a child of front's client span");
    assert.equal(backServer.attributes["rpc.grpc.status_code"], 0);
    assert.equal(backServer.attributes["rpc.service"], "rpctest.v1.LibraryService");
    return { frontServer, backServer };
  }

  test("REST with a traceparent: x-trace-id is its trace id, one trace across both servers", async () => {
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parent = "00f067aa0ba902b7";
    const res = await fetch(`${frontUrl}/v1/echo`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        traceparent: `00-${traceId}-${parent}-01`,
        "x-trace-id": "some-other-id",
      },
      body: JSON.stringify({ text: "hi" }),
    });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { text: string }).text, "back:hi");
    assert.equal(res.headers.get("x-trace-id"), traceId);
    const { frontServer } = assertChain(await chainOf(traceId), parent);
    assert.equal(frontServer.name, "POST /v1/echo");
    assert.equal(frontServer.attributes["http.response.status_code"], 200);
    assert.match(seenByBack.at(-1) ?? "", new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
  });

  test("gRPC without a traceparent: a new root trace, its id is the x-trace-id the caller gets", async () => {
    const client = createClient(LibraryService, createGrpcTransport({ baseUrl: frontUrl }));
    let traceId = "";
    await client.echo({ text: "grpc" }, { onHeader: (h) => (traceId = h.get("x-trace-id") ?? "") });
    assert.match(traceId, /^[0-9a-f]{32}$/);
    const spans = await chainOf(traceId);
    const { frontServer } = assertChain(spans, "");
    assert.equal(frontServer.name, "rpctest.v1.LibraryService/Echo");
  });

  test("a client's x-trace-id that is a W3C trace id becomes the trace's id", async () => {
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    const res = await fetch(`${frontUrl}/v1/echo/abc`, { headers: { "x-trace-id": traceId } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-trace-id"), traceId);
    assertChain(await chainOf(traceId), "");
  });

  test("probes make no spans", async () => {
    const before = receiver.spans.length;
    assert.equal((await fetch(`${frontUrl}/livez`)).status, 200);
    await flushTracing();
    assert.equal(receiver.spans.length, before);
  });

  test("a call made outside any trace starts none, here or at the callee (its traceparent is not sampled)", async () => {
    const before = receiver.spans.length;
    const client = createClient(LibraryService, createServiceTransport({ baseUrl: backUrl }));
    await client.echo({ text: "background" });
    assert.match(seenByBack.at(-1) ?? "", /^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    await flushTracing();
    assert.equal(receiver.spans.length, before);
  });

  test("with export off, a traceparent still passes through to the next service", async () => {
    await tracing.shutdown();
    const traceId = "11111111111111111111111111111111";
    const parent = "2222222222222222";
    const res = await fetch(`${frontUrl}/v1/echo`, {
      method: "POST",
      headers: { "content-type": "application/json", traceparent: `00-${traceId}-${parent}-01` },
      body: JSON.stringify({ text: "off" }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-trace-id"), traceId);
    assert.equal(seenByBack.at(-1), `00-${traceId}-${parent}-01`);
  });
});
