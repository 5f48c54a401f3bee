import assert from "node:assert/strict";
import { test } from "node:test";
import type { Interceptor } from "@connectrpc/connect";
import { createServiceTransport } from "@platform/rpc";
import { freePort } from "../orchestrator/local/free-port.ts";
import { startWorker } from "../worker/worker.ts";
import { waitServing } from "./grpc-health.ts";

test("waitServing: the first probe goes over the caller's transport, the retries over connections of their own", async () => {
  const port = await freePort("127.0.0.1");
  const url = `http://127.0.0.1:${port}`;
  let overTransport = 0;
  const count: Interceptor = (next) => (req) => {
    overTransport++;
    return next(req);
  };
  const transport = createServiceTransport({ baseUrl: url, interceptors: [count] });

  // Nothing listens yet: the first probe (over the transport) fails, the wait goes on.
  const waiting = waitServing(url, 120_000, { transport, intervalMs: 10 });
  while (overTransport === 0) await new Promise((r) => setTimeout(r, 5));
  const worker = await startWorker({
    tenantId: "7e57a000-0000-4000-8000-000000000001",
    orgId: "7e57a000-0000-4000-8000-000000000001",
    agentsUrl: "http://127.0.0.1:9",
    port,
    host: "127.0.0.1",
    tls: undefined,
  });
  try {
    assert.equal(await waiting, true);
    assert.equal(overTransport, 1, "retries do not reuse the transport");
    // Serving already: answered over the transport.
    assert.equal(await waitServing(url, 120_000, { transport }), true);
    assert.equal(overTransport, 2);
  } finally {
    await worker.close();
  }
});
