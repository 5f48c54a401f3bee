import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { PlatformError } from "@platform/errors";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { isServing } from "../health/grpc-health.ts";
import { Metadata } from "../metadata.ts";
import { AgentsDouble } from "../testing/agents-double.ts";
import { type RunningServer, startWorker } from "./worker.ts";

const TENANT = "7e57a000-0000-4000-8000-000000000001";
const USER = "11111111-0000-4000-8000-000000000002";
const SESSION = "5e551000-0000-4000-8000-000000000003";

const headers = (over: Record<string, string | undefined> = {}) => {
  const h: Record<string, string> = {};
  const all: Record<string, string | undefined> = {
    [Metadata.authorization]: "Bearer tok.en.sig",
    [Metadata.tenantId]: TENANT,
    [Metadata.orgId]: TENANT,
    [Metadata.userId]: USER,
    [Metadata.requestId]: "req-1",
    [Metadata.traceId]: "trace-1",
    ...over,
  };
  for (const [k, v] of Object.entries(all)) if (v !== undefined) h[k] = v;
  return h;
};

describe("tenant worker", () => {
  const agents = new AgentsDouble();
  let worker: RunningServer;
  let client: ReturnType<typeof createClient<typeof RuntimeService>>;

  before(async () => {
    const agentsUrl = await agents.start();
    worker = await startWorker({
      tenantId: TENANT,
      orgId: TENANT,
      agentsUrl,
      port: 0,
      host: "127.0.0.1",
      tls: undefined,
    });
    client = createClient(RuntimeService, createGrpcTransport({ baseUrl: worker.url }));
  });
  after(async () => {
    await worker.close();
    await agents.close();
  });
  beforeEach(() => {
    agents.calls.length = 0;
    agents.script = () => [{ type: "text", content: "hello" }, { type: "done" }];
  });

  async function collect(req: Parameters<typeof client.invoke>[0], h = headers()) {
    const out: Array<{ case: string | undefined; value: unknown }> = [];
    for await (const e of client.invoke(req, { headers: h }))
      out.push({ case: e.event.case, value: e.event.value && { ...e.event.value } });
    return out.map(({ case: c, value }) => {
      const { $typeName, ...rest } = (value ?? {}) as Record<string, unknown>;
      return { case: c, ...rest };
    });
  }

  test("reports SERVING for runtime.v1.RuntimeService from start-up", async () => {
    assert.equal(await isServing(worker.url, "runtime.v1.RuntimeService"), true);
    assert.equal(await isServing(worker.url, "no.such.Service"), false);
  });

  test("forwards messages with the caller's credential and context; maps text, done; drops tool events", async () => {
    agents.script = () => [
      { type: "text", content: "line one\nline two" },
      { type: "tool_use", content: 'bash {"cmd":"ls"}', toolUseId: "t1" },
      { type: "tool_result", content: "a.txt\nexit 0", toolUseId: "t1" },
      { type: "text", content: "done." },
      { type: "done", tokensIn: 10n, tokensOut: 5n },
    ];
    const events = await collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] });
    assert.deepEqual(events, [
      { case: "textChunk", content: "line one\nline two" },
      { case: "textChunk", content: "done." },
      { case: "turnDone" },
    ]);
    assert.equal(agents.calls.length, 1);
    const call = agents.calls[0]!;
    assert.equal(call.method, "sendMessages");
    assert.equal((call.request as { id: string }).id, SESSION);
    assert.equal((call.request as { messages: Array<{ content: string }> }).messages[0]?.content, "hi");
    assert.equal(call.headers.authorization, "Bearer tok.en.sig");
    assert.equal(call.headers["x-tenant-id"], TENANT);
    assert.equal(call.headers["x-org-id"], TENANT);
    assert.equal(call.headers["x-user-id"], USER);
    assert.equal(call.headers["x-request-id"], "req-1");
    assert.equal(call.headers["x-trace-id"], "trace-1");
  });

  test("a queued send (issue 20) passes through: message_queued and the taken message are dropped, its run's text and done map", async () => {
    agents.script = () => [
      { type: "message_queued", content: '{"messages":[{"role":"user","content":"hi"}],"mode":"enqueue"}' },
      { type: "user", content: "hi", queuedSeq: 7n },
      { type: "text", content: "queued reply" },
      { type: "done", tokensIn: 1n, tokensOut: 2n },
    ];
    const events = await collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] });
    assert.deepEqual(events, [{ case: "textChunk", content: "queued reply" }, { case: "turnDone" }]);
  });

  test("a run another send interrupted (issue 20) ends the invoke with its error event", async () => {
    agents.script = () => [
      { type: "text", content: "partial" },
      { type: "message_queued", content: '{"messages":[{"role":"user","content":"stop"}],"mode":"interrupt"}' },
      { type: "error", content: "the run was interrupted by a new message" },
    ];
    const events = await collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] });
    assert.deepEqual(events, [
      { case: "textChunk", content: "partial" },
      { case: "error", message: "the run was interrupted by a new message" },
    ]);
  });

  test("an agents error event becomes the error event and ends the stream", async () => {
    agents.script = () => [
      { type: "text", content: "partial" },
      { type: "error", content: "model provider unreachable" },
      { type: "text", content: "never" },
    ];
    assert.deepEqual(await collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] }), [
      { case: "textChunk", content: "partial" },
      { case: "error", message: "model provider unreachable" },
    ]);
  });

  test("a run paused on tool calls (agents' requires_action) ends the stream with requires_action naming them", async () => {
    agents.script = () => [
      { type: "text", content: "let me check" },
      {
        type: "requires_action",
        content: JSON.stringify({
          calls: [
            { toolUseId: "t1", name: "bash", input: { command: "ls" } },
            { toolUseId: "t2", name: "pick_color", input: { hue: 1 }, kind: "client" },
          ],
        }),
      },
      { type: "text", content: "never" },
    ];
    const events = await collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] });
    assert.deepEqual(
      events.map((e) => e.case),
      ["textChunk", "requiresAction"],
    );
    const calls = (
      events[1] as unknown as { calls: Array<{ toolUseId: string; name: string; input: string; kind: string }> }
    ).calls;
    assert.deepEqual(
      calls.map((c) => [c.toolUseId, c.name, JSON.parse(c.input), c.kind]),
      [
        ["t1", "bash", { command: "ls" }, ""],
        ["t2", "pick_color", { hue: 1 }, "client"],
      ],
    );
  });

  test("without messages, a session waiting for tool decisions answers requires_action with its pending calls", async () => {
    agents.session = {
      session: { id: SESSION, status: "idle" },
      events: [],
      pendingToolCalls: [{ toolUseId: "t2", name: "bash", input: '{"command":"rm -rf x"}' }],
    };
    const events = await collect({ sessionId: SESSION });
    assert.deepEqual(
      events.map((e) => e.case),
      ["requiresAction"],
    );
    const [call] = (events[0] as unknown as { calls: Array<{ toolUseId: string; input: string }> }).calls;
    assert.equal(call?.toolUseId, "t2");
    assert.equal(call?.input, '{"command":"rm -rf x"}');
  });

  for (const key of [Metadata.tenantId, Metadata.orgId, Metadata.userId, Metadata.authorization]) {
    test(`missing ${key} is UNAUTHENTICATED and nothing is forwarded`, async () => {
      await assert.rejects(
        collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] }, headers({ [key]: undefined })),
        (err) => err instanceof ConnectError && err.code === Code.Unauthenticated,
      );
      assert.equal(agents.calls.length, 0);
    });
  }

  test("metadata of another tenant is UNAUTHENTICATED", async () => {
    const other = "0a0a0a0a-0000-4000-8000-000000000009";
    await assert.rejects(
      collect(
        { sessionId: SESSION, messages: [{ role: "user", content: "x" }] },
        headers({ [Metadata.tenantId]: other, [Metadata.orgId]: other }),
      ),
      (err) => err instanceof ConnectError && err.code === Code.Unauthenticated,
    );
  });

  test("an agents call that fails is INTERNAL, also mid-stream", async () => {
    agents.script = () => PlatformError.unavailable("model provider unreachable");
    await assert.rejects(
      collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] }),
      (err) =>
        err instanceof ConnectError && err.code === Code.Internal && /model provider unreachable/.test(err.message),
    );
    agents.script = () => [
      { type: "text", content: "a" },
      { type: "__throw", content: "connection reset" },
    ];
    const seen: string[] = [];
    await assert.rejects(
      (async () => {
        for await (const e of client.invoke(
          { sessionId: SESSION, messages: [{ role: "user", content: "hi" }] },
          { headers: headers() },
        ))
          seen.push(e.event.case ?? "");
      })(),
      (err) => err instanceof ConnectError && err.code === Code.Internal,
    );
    assert.deepEqual(seen, ["textChunk"]);
  });

  test("an unreachable agents service is INTERNAL", async () => {
    const lonely = await startWorker({
      tenantId: TENANT,
      orgId: TENANT,
      agentsUrl: "http://127.0.0.1:9",
      port: 0,
      host: "127.0.0.1",
      tls: undefined,
    });
    try {
      const c = createClient(RuntimeService, createGrpcTransport({ baseUrl: lonely.url }));
      await assert.rejects(
        (async () => {
          for await (const _ of c.invoke(
            { sessionId: SESSION, messages: [{ role: "user", content: "hi" }] },
            { headers: headers() },
          )) {
          }
        })(),
        (err) => err instanceof ConnectError && err.code === Code.Internal,
      );
    } finally {
      await lonely.close();
    }
  });

  test("request and trace ids: the message echo first, then metadata, else generated per call", async () => {
    await collect(
      { sessionId: SESSION, requestId: "from-body", traceId: "t-body", messages: [{ role: "user", content: "x" }] },
      headers({ [Metadata.requestId]: undefined, [Metadata.traceId]: undefined }),
    );
    assert.equal(agents.calls[0]?.headers["x-request-id"], "from-body");
    assert.equal(agents.calls[0]?.headers["x-trace-id"], "t-body");
    await collect(
      { sessionId: SESSION, messages: [{ role: "user", content: "x" }] },
      headers({ [Metadata.requestId]: undefined, [Metadata.traceId]: undefined }),
    );
    assert.match(agents.calls[1]?.headers["x-request-id"] ?? "", /^[0-9a-f-]{36}$/);
    assert.match(agents.calls[1]?.headers["x-trace-id"] ?? "", /^[0-9a-f]{32}$/);
    await collect(
      { sessionId: SESSION, messages: [{ role: "user", content: "x" }] },
      headers({ [Metadata.requestId]: undefined, [Metadata.traceId]: undefined }),
    );
    assert.notEqual(agents.calls[2]?.headers["x-request-id"], agents.calls[1]?.headers["x-request-id"]);
  });

  test("a request the agents service refuses as malformed stays INVALID_ARGUMENT with its message", async () => {
    agents.script = () => PlatformError.invalidArgument("messages[0].role must be user, assistant or tool");
    await assert.rejects(
      collect({ sessionId: SESSION, messages: [{ role: "x".repeat(1000), content: "hi" }] }),
      (err) => err instanceof ConnectError && err.code === Code.InvalidArgument && /role must be/.test(err.rawMessage),
    );
  });

  test("the agents service's refusal of the request (no such session, a busy one) is relayed with its code, before any event", async () => {
    for (const err of [
      PlatformError.notFound("session not found"),
      PlatformError.failedPrecondition("a run is in progress"),
    ]) {
      agents.script = () => err;
      await assert.rejects(
        collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] }),
        (e) => e instanceof ConnectError && e.code === (err.code as number) && e.rawMessage === err.message,
      );
    }
  });

  test("an agents client failure is INTERNAL without its JavaScript or transport text", async () => {
    agents.script = () => [
      { type: "text", content: "a" },
      { type: "__throw", content: "read ECONNRESET 10.1.2.3:50051" },
    ];
    await assert.rejects(
      collect({ sessionId: SESSION, messages: [{ role: "user", content: "hi" }] }),
      (err) => err instanceof ConnectError && err.code === Code.Internal && err.rawMessage === "agents call failed",
    );
  });

  test("ids that are not short printable tokens (non-Latin-1, too long, spaces) are replaced, never INTERNAL", async () => {
    const hostile = ["日本", "é", "x".repeat(129), "a b", "\u{1F600}"];
    for (const id of hostile) {
      agents.calls.length = 0;
      const events = await collect({
        sessionId: SESSION,
        requestId: id,
        traceId: id,
        messages: [{ role: "user", content: "x" }],
      });
      assert.deepEqual(events, [{ case: "textChunk", content: "hello" }, { case: "turnDone" }], id);
      // The metadata's valid ids take over from the rejected echo fields.
      assert.equal(agents.calls[0]?.headers["x-request-id"], "req-1", id);
      assert.equal(agents.calls[0]?.headers["x-trace-id"], "trace-1", id);
    }
    // Raw HTTP/2 metadata: UTF-8 bytes arrive as Latin-1 text and are replaced by generated ids.
    agents.calls.length = 0;
    const utf8 = Buffer.from("日本-id", "utf8").toString("latin1");
    const events = await collect(
      { sessionId: SESSION, messages: [{ role: "user", content: "x" }] },
      headers({ [Metadata.requestId]: utf8, [Metadata.traceId]: "t".repeat(300) }),
    );
    assert.equal(events.at(-1)?.case, "turnDone");
    assert.match(agents.calls[0]?.headers["x-request-id"] ?? "", /^[0-9a-f-]{36}$/);
    assert.match(agents.calls[0]?.headers["x-trace-id"] ?? "", /^[0-9a-f]{32}$/);
  });

  test("without messages it rejoins the running turn after the last terminal event", async () => {
    agents.session = {
      session: { id: SESSION, status: "running" },
      events: [
        { seq: 1n, type: "user" },
        { seq: 2n, type: "text", content: "old" },
        { seq: 3n, type: "done" },
        { seq: 4n, type: "user" },
        { seq: 5n, type: "text", content: "new" },
      ],
    };
    agents.script = (call) => {
      assert.equal(call.method, "streamEvents");
      return [{ type: "text", content: "new" }, { type: "text", content: " more" }, { type: "done" }];
    };
    assert.deepEqual(await collect({ sessionId: SESSION }), [
      { case: "textChunk", content: "new" },
      { case: "textChunk", content: " more" },
      { case: "turnDone" },
    ]);
    assert.deepEqual(
      agents.calls.map((c) => c.method),
      ["getSession", "streamEvents"],
    );
    assert.equal((agents.calls[1]!.request as { after: bigint }).after, 3n);
  });

  test("without messages and no running turn it answers turn_done at once", async () => {
    agents.session = { session: { id: SESSION, status: "idle" }, events: [] };
    assert.deepEqual(await collect({ sessionId: SESSION }), [{ case: "turnDone" }]);
    assert.deepEqual(
      agents.calls.map((c) => c.method),
      ["getSession"],
    );
  });
});
