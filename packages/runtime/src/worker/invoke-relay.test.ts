import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { InvokeRequestSchema } from "@platform/gen/runtime/v1/runtime_pb";
import { promisesPerItem } from "@platform/rpc/testing/promise-count";
import { Metadata } from "../metadata.ts";
import type { AgentEvent, AgentsPort } from "./agents-port.ts";
import { workerInvoke } from "./invoke.ts";

// Every streamed token passes through the worker's Invoke on its way from
// agents to the router (packages/bench/ANALYSIS.md, per-token latency): its
// events are mapped by an iterator object, one promise an event, where an
// async generator's for-await and yield cost three.

const TENANT = "7e57a000-0000-4000-8000-000000000001";

/** Agents' events as direct-stream.ts hands them over: one already settled promise each. */
function port(events: AgentEvent[]): AgentsPort {
  const stream = (): AsyncIterable<AgentEvent> => {
    let at = 0;
    return {
      [Symbol.asyncIterator]: () => ({
        next: () =>
          Promise.resolve(
            at < events.length ? { done: false, value: events[at++]! } : { done: true, value: undefined },
          ),
      }),
    };
  };
  return { sendMessages: stream, rejoin: stream };
}

function context(): HandlerContext {
  const requestHeader = new Headers({
    [Metadata.authorization]: "Bearer tok.en.sig",
    [Metadata.tenantId]: TENANT,
    [Metadata.orgId]: TENANT,
    [Metadata.userId]: "11111111-0000-4000-8000-000000000002",
  });
  return { requestHeader, signal: new AbortController().signal, values: { get: () => undefined } } as never;
}

const request = create(InvokeRequestSchema, {
  sessionId: "5e551000-0000-4000-8000-000000000003",
  messages: [{ role: "user", content: "go" }],
});

test("the worker's Invoke maps each agents event with one promise", async () => {
  // The source's read and the mapping's reaction (6 with the generator).
  const perEvent = await promisesPerItem(async (n) => {
    const events: AgentEvent[] = [
      { type: "tool_use", content: "{}" },
      ...Array.from({ length: n }, (_, i) => ({ type: "text", content: `t${i}` })),
      { type: "done", content: "" },
      { type: "text", content: "after the terminal event" },
    ];
    const invoke = workerInvoke({ tenantId: TENANT, orgId: TENANT, agents: port(events) });
    const cases: Array<string | undefined> = [];
    for await (const e of invoke(request, context())) cases.push(e.event?.case);
    assert.equal(cases.filter((c) => c === "textChunk").length, n);
    // The tool_use is dropped; nothing after the terminal event is relayed.
    assert.equal(cases.length, n + 1);
    assert.equal(cases.at(-1), "turnDone");
  });
  assert.ok(perEvent < 4, `${perEvent} promises an event`);
});
