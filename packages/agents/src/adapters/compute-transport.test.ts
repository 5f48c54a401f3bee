import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { ComputeService, type ExecEvent, ExecEventSchema } from "@platform/gen/compute/v1/compute_pb";
import { codeNameEnvelope, createServer, type Server } from "@platform/rpc";
import { promisesPerItem } from "@platform/rpc/testing/promise-count";
import pino from "pino";
import { ComputeSandboxes } from "./compute.ts";
import { computeTransport } from "./grpc-transport.ts";

// Agents reads ExecCommand's output through @platform/rpc's direct stream
// reader (grpc/direct-stream.ts), not Connect's client, which took each event
// through about six async generators (a third of the CPU of streaming exec
// output on a 2-core machine: packages/bench/ANALYSIS.md, exec throughput).

let server: Server;
let url = "";
const execImpl: Partial<ServiceImpl<typeof ComputeService>> = {
  async *execCommand(req) {
    const n = Number(req.args[0]);
    for (let i = 0; i < n; i++)
      yield create(ExecEventSchema, { event: { case: "stdout", value: { data: Buffer.from(`${i}\n`) } } });
    yield create(ExecEventSchema, { event: { case: "completed", value: { exitCode: 7 } } }) as ExecEvent;
  },
};

before(async () => {
  server = createServer({
    name: "compute-stand-in",
    envelope: codeNameEnvelope("compute-stand-in"),
    logger: pino({ level: "silent" }),
    services: [{ service: ComputeService, impl: execImpl }],
  });
  url = (await server.listen()).url;
});
after(() => server.close());

test("ExecCommand's events are read by the direct stream reader: a few promises an event, not Connect's pipeline", async () => {
  const sandboxes = new ComputeSandboxes(computeTransport(url));
  const exec = (n: number) =>
    sandboxes.exec("sb", "seq", [String(n)], {
      timeoutMs: 10_000,
      maxOutputBytes: 1 << 20,
      signal: new AbortController().signal,
    });
  // Promises made in this process (the stand-in server's included) while an exec of n events is read.
  const perEvent = await promisesPerItem(async (n) => {
    const r = await exec(n);
    assert.equal(r.exitCode, 7);
    assert.equal(r.stdoutBytes, Array.from({ length: n }, (_, i) => `${i}\n`).join("").length);
  });
  // The stand-in's handler makes most of these; Connect's client added ~18 an event on top.
  assert.ok(perEvent < 15, `${perEvent} promises an event`);
});
