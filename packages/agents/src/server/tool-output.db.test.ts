import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import pino from "pino";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "../testing/compute-double.ts";
import { testAgentsConfig } from "../testing/config.ts";
import { IdentityDouble } from "@platform/identity-client/testing";
import { createAgentsTestDatabase } from "../testing/database.ts";

// tool_output on the real server: a command that prints for about a second
// shows its output on the session stream while it runs, before its
// tool_result, and the log keeps those events.

let service: AgentsServer;
let base: string;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
const identity = new IdentityDouble();
const compute = new ComputeDouble();

before(async () => {
  database = await createAgentsTestDatabase();
  const config = testAgentsConfig(
    { identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() },
    { toolTimeoutMs: 10_000 },
  );
  service = await createAgentsServer(config, pino({ level: "silent" }), {
    providers: new ProviderRegistry().register("dev", new DevModel()),
    database,
    pollMs: 200,
    internalTls: undefined,
  });
  base = (await service.listen()).url;
});
after(async () => {
  await service?.close();
  await identity.stop();
  await compute.stop();
  await database?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;
type Frame = { id: number; at: number; data: Json };

/** The SSE frames of a response, each with the time it arrived. */
async function frames(res: Response): Promise<Frame[]> {
  const out: Frame[] = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const lines = block.split("\n");
      const data = lines.find((l) => l.startsWith("data:"));
      const id = lines.find((l) => l.startsWith("id:"));
      if (data) out.push({ id: Number(id?.slice(3).trim()), at: Date.now(), data: JSON.parse(data.slice(5)) });
      end = buffer.indexOf("\n\n");
    }
  }
  return out;
}

test("a command printing over ~1 s yields tool_output events live, before its tool_result, and in the stored log", async () => {
  const caller = identity.caller();
  const auth = { authorization: `Bearer ${caller.token}`, "content-type": "application/json" };
  const agent = (await (
    await fetch(`${base}/v1/agents`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ name: "T", slug: "t", model: "dev/echo" }),
    })
  ).json()) as Json;
  const session = (await (
    await fetch(`${base}/v1/sessions`, { method: "POST", headers: auth, body: JSON.stringify({ agentId: agent.id }) })
  ).json()) as Json;
  const res = await fetch(`${base}/v1/sessions/${session.id}/messages`, {
    method: "POST",
    headers: { ...auth, accept: "text/event-stream" },
    body: JSON.stringify({ messages: [{ role: "user", content: "run: ticks 5 200" }] }),
  });
  assert.equal(res.status, 200);
  const live = await frames(res);
  const types = live.map((f) => f.data.type);
  const use = live.find((f) => f.data.type === "tool_use")!;
  const result = live.find((f) => f.data.type === "tool_result")!;
  const outputs = live.filter((f) => f.data.type === "tool_output");
  assert.ok(outputs.length >= 3, `several tool_output events while the command ran: ${types.join(",")}`);
  assert.ok(outputs.length <= 8, `rate-limited: ${outputs.length} events for 5 lines over 1 s`);
  assert.ok(
    outputs.every((f) => f.id > use.id && f.id < result.id),
    "between tool_use and tool_result",
  );
  assert.ok(
    outputs.every((f) => f.data.toolUseId === use.data.toolUseId && f.data.toolUseId),
    "each names its tool call",
  );
  // Live: the first output arrived while the command still had most of its second to run.
  assert.ok(result.at - outputs[0]!.at >= 500, `first output ${result.at - outputs[0]!.at} ms before the result`);
  const text = outputs.map((f) => JSON.parse(f.data.content).stdout ?? "").join("");
  assert.equal(text, "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n");
  // The model's result is what it always was: the capped output and exit code.
  assert.deepEqual(JSON.parse(result.data.content), {
    exitCode: 0,
    stdout: "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\n",
  });
  assert.equal(types.at(-1), "done");
  assert.match(
    live
      .filter((f) => f.data.type === "text")
      .map((f) => f.data.content)
      .join(""),
    /exited with code 0/,
  );

  const stored = (await (await fetch(`${base}/v1/sessions/${session.id}`, { headers: auth })).json()) as {
    events: Json[];
  };
  const storedOutputs = stored.events.filter((e) => e.type === "tool_output");
  assert.deepEqual(
    storedOutputs.map((e) => [Number(e.seq), e.content, e.toolUseId]),
    outputs.map((f) => [f.id, f.data.content, f.data.toolUseId]),
  );
  const times = storedOutputs.map((e) => Date.parse(e.createdAt));
  assert.ok(times.at(-1)! - times[0]! >= 500, "the stored events keep the times they were streamed at");
});
