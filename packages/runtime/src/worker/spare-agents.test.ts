import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { promisesPerItem } from "@platform/rpc/testing/promise-count";
import { AgentsDouble } from "../testing/agents-double.ts";
import { connectAgents } from "./warm-up.ts";

// A spare opens its agents connection before it knows its tenant
// (warm-up.ts). Once adopted it must read the reply as a worker started with
// its tenant does, through rpc's direct stream reader: Connect's client took
// each event through about six more async generators, on the path of every
// streamed token (packages/bench/ANALYSIS.md, per-token latency).

const agents = new AgentsDouble();
let url = "";
before(async () => {
  url = await agents.start();
});
after(() => agents.close());

const CALL = {
  authorization: "Bearer tok.en.sig",
  tenantId: "7e57a000-0000-4000-8000-000000000001",
  orgId: "7e57a000-0000-4000-8000-000000000001",
  userId: "11111111-0000-4000-8000-000000000002",
  requestId: "req-1",
  traceId: "trace-1",
};

test("an adopted spare's agents client reads SendMessages' events with a few promises an event", async () => {
  const { agents: port } = await connectAgents(url, undefined);
  // Promises made in this process (the double's server included) while a reply of n text events is read.
  const perEvent = await promisesPerItem(async (n) => {
    agents.script = () => [
      ...Array.from({ length: n }, (_, i) => ({ type: "text", content: `t${i}` })),
      { type: "done" },
    ];
    let texts = 0;
    for await (const e of port.sendMessages(
      "5e551000-0000-4000-8000-000000000003",
      [],
      CALL,
      new AbortController().signal,
    ))
      if (e.type === "text") texts++;
    assert.equal(texts, n);
  });
  assert.ok(perEvent < 15, `${perEvent} promises an event`);
});
