import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient, type ServiceImpl } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { LibraryService, StreamService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { currentRequest, type RequestInfo, requestInfo } from "../context.ts";
import { createProbe, libraryImpl, streamImpl, testServer } from "../testing/fixture.ts";

/** What a handler saw of its request (id and peer): in its context values, and as the async-local current request. */
interface Seen {
  fromContext: string | undefined;
  asyncLocal: string | undefined;
}

/** The entry's own RequestInfo carries the peer's address: one made later from the headers would not. */
function sawOf(fromContext: RequestInfo | undefined, asyncLocal: RequestInfo | undefined): Seen {
  const of = (i: RequestInfo | undefined) => i && `${i.requestId} from ${i.remoteAddress}`;
  return { fromContext: of(fromContext), asyncLocal: of(asyncLocal) };
}

function serverWith(asyncRequestContext: boolean | undefined) {
  const seen: Seen[] = [];
  const probe = createProbe();
  const library = libraryImpl(probe);
  const streams = streamImpl(probe);
  const impl: ServiceImpl<typeof LibraryService> = {
    ...library,
    async echo(req, ctx) {
      // After an await: an async-local store would have had to follow the promise.
      await new Promise((r) => setImmediate(r));
      seen.push(sawOf(requestInfo(ctx), currentRequest()));
      return { text: req.text };
    },
  };
  const streamService: ServiceImpl<typeof StreamService> = {
    ...streams,
    async *tick(_req, ctx) {
      await new Promise((r) => setImmediate(r));
      seen.push(sawOf(requestInfo(ctx), currentRequest()));
      yield { seq: 1n, text: "tick 1", tokens: 1000n, last: true };
    },
  };
  const { server } = testServer({
    ...(asyncRequestContext === undefined ? {} : { asyncRequestContext }),
    services: [
      { service: LibraryService, impl },
      { service: StreamService, impl: streamService },
    ],
  });
  return { server, seen };
}

/** One call of each kind a server takes, each with its own x-request-id. */
async function callEveryWay(url: string): Promise<string[]> {
  const grpc = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
  const connect = createClient(LibraryService, createConnectTransport({ baseUrl: url, httpVersion: "2" }));
  const grpcStreams = createClient(StreamService, createGrpcTransport({ baseUrl: url }));
  // Plain gRPC (the direct path), Connect (Connect's own handler), REST (the transcoder).
  await grpc.echo({ text: "a" }, { headers: { "x-request-id": "grpc-unary" } });
  await connect.echo({ text: "b" }, { headers: { "x-request-id": "connect-unary" } });
  const r = await fetch(`${url}/v1/echo`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-request-id": "rest-unary" },
    body: JSON.stringify({ text: "c" }),
  });
  assert.equal(r.status, 200);
  for await (const _ of grpcStreams.tick({ count: 1 }, { headers: { "x-request-id": "grpc-stream" } })) void _;
  const sse = await fetch(`${url}/v1/ticks?count=1`, {
    headers: { accept: "text/event-stream", "x-request-id": "rest-stream" },
  });
  assert.equal(sse.status, 200);
  await sse.text();
  return ["grpc-unary", "connect-unary", "rest-unary", "grpc-stream", "rest-stream"];
}

const cases = [
  {
    option: false,
    name: "asyncRequestContext: false: every kind of call reaches its handler with its request's ids, and no async-local store is entered",
    asyncLocal: (_id: string) => undefined,
  },
  {
    option: undefined,
    name: "asyncRequestContext by default: the handler's context and the async path name the same request",
    asyncLocal: (id: string) => `${id} from 127.0.0.1`,
  },
];

for (const c of cases) {
  describe(c.name, () => {
    const { server, seen } = serverWith(c.option);
    let url = "";
    before(async () => {
      url = (await server.listen()).url;
    });
    after(() => server.close());

    test("each call as its request", async () => {
      const ids = await callEveryWay(url);
      assert.deepEqual(
        seen,
        ids.map((id) => ({ fromContext: `${id} from 127.0.0.1`, asyncLocal: c.asyncLocal(id) })),
      );
    });
  });
}
