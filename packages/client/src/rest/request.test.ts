import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import {
  AgentService,
  CreateAgentRequestSchema,
  ListSessionsRequestSchema,
  ReadSessionFileRequestSchema,
  SessionEventSchema,
  SessionService,
} from "@platform/gen/agents/v1/agents_pb";
import { InvokeEventSchema, RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { httpBindingsOf, sseOf } from "@platform/rpc/http-rule";
import { buildCall } from "./request.ts";
import { decodeSseEvent } from "./sse.ts";

const base = "http://h:1/";

test("path variables, query parameters and the body follow the google.api.http rule", () => {
  const m = AgentService.method.createAgent;
  const c = buildCall(
    base,
    m,
    httpBindingsOf(m),
    create(CreateAgentRequestSchema, { name: "a", slug: "s", model: "dev/echo" }),
  );
  assert.equal(c.verb, "POST");
  assert.equal(c.url, "http://h:1/v1/agents");
  assert.deepEqual(JSON.parse(c.body!), { name: "a", slug: "s", model: "dev/echo" });
  assert.equal(c.binding.responseBody, "agent");

  const r = SessionService.method.readSessionFile;
  const read = buildCall(
    base,
    r,
    httpBindingsOf(r),
    create(ReadSessionFileRequestSchema, { id: "a/b", path: "x y.txt", offset: 5n }),
  );
  assert.equal(read.verb, "GET");
  assert.equal(read.url, "http://h:1/v1/sessions/a%2Fb/files:read?path=x+y.txt&offset=5");
  assert.equal(read.body, undefined);

  const l = SessionService.method.listSessions;
  const list = buildCall(base, l, httpBindingsOf(l), create(ListSessionsRequestSchema, { agentId: "ag", limit: 3 }));
  assert.equal(list.url, "http://h:1/v1/sessions?limit=3&agentId=ag");
});

test("SSE: the id line goes back into seq; the router's named events pick the oneof variant", () => {
  const s = SessionService.method.sendMessages;
  const ev = decodeSseEvent(s.output, sseOf(s)!, {
    id: "42",
    event: undefined,
    data: '{"type":"text","content":"hi"}',
  });
  assert.equal(ev?.message.$typeName, SessionEventSchema.typeName);
  assert.deepEqual(
    { ...ev!.message, $typeName: undefined, createdAt: undefined },
    {
      ...create(SessionEventSchema, { seq: 42n, type: "text", content: "hi" }),
      $typeName: undefined,
      createdAt: undefined,
    },
  );
  const inv = RuntimeService.method.invoke;
  const text = decodeSseEvent(inv.output, sseOf(inv)!, { id: undefined, event: undefined, data: "a\\nb" });
  assert.deepEqual(
    text?.message,
    create(InvokeEventSchema, { event: { case: "textChunk", value: { content: "a\nb" } } }),
  );
  assert.equal(text?.terminal, false);
  const done = decodeSseEvent(inv.output, sseOf(inv)!, { id: undefined, event: "turn_done", data: "{}" });
  assert.equal(done?.terminal, true);
  assert.equal(decodeSseEvent(inv.output, sseOf(inv)!, { id: undefined, event: "future_kind", data: "{}" }), undefined);
});
