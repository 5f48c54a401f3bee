import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus as S } from "@platform/gen/grpc/health/v1/health_pb";
import { testServer } from "../testing/fixture.ts";

describe("grpc.health.v1", () => {
  const { server } = testServer();
  let client: ReturnType<typeof createClient<typeof Health>>;
  before(async () => {
    const { url } = await server.listen();
    client = createClient(Health, createGrpcTransport({ baseUrl: url }));
  });
  after(() => server.close());

  test("Check: the server and each service are SERVING after listen", async () => {
    assert.equal((await client.check({ service: "" })).status, S.SERVING);
    assert.equal((await client.check({ service: "rpctest.v1.LibraryService" })).status, S.SERVING);
  });

  test("Check: unknown service → NOT_FOUND", async () => {
    await assert.rejects(
      client.check({ service: "nope.v1.Nothing" }),
      (e) => e instanceof ConnectError && e.code === Code.NotFound,
    );
  });

  test("Watch: current status, then every change, until cancelled", async () => {
    const abort = new AbortController();
    const seen: S[] = [];
    const it = client.watch({ service: "rpctest.v1.StreamService" }, { signal: abort.signal })[Symbol.asyncIterator]();
    seen.push((await it.next()).value.status);
    server.health.setNotServing("rpctest.v1.StreamService");
    seen.push((await it.next()).value.status);
    server.health.setServing("rpctest.v1.StreamService");
    seen.push((await it.next()).value.status);
    abort.abort();
    assert.deepEqual(seen, [S.SERVING, S.NOT_SERVING, S.SERVING]);
  });

  test("Watch: an unknown service is SERVICE_UNKNOWN until it is registered", async () => {
    const abort = new AbortController();
    const it = client.watch({ service: "late.v1.Service" }, { signal: abort.signal })[Symbol.asyncIterator]();
    assert.equal((await it.next()).value.status, S.SERVICE_UNKNOWN);
    server.health.setServing("late.v1.Service");
    assert.equal((await it.next()).value.status, S.SERVING);
    abort.abort();
  });
});

describe("readiness and shutdown status", () => {
  let ready = false;
  const { server } = testServer({ readiness: async () => ready });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });

  test("/livez and /healthz are 200; /readyz follows readiness()", async () => {
    assert.equal((await fetch(`${url}/livez`)).status, 200);
    assert.equal((await fetch(`${url}/healthz`)).status, 200);
    assert.equal((await fetch(`${url}/readyz`)).status, 503);
    ready = true;
    const readyz = await fetch(`${url}/readyz`);
    assert.equal(readyz.status, 200);
    // What `platform status` shows: which service answers, and its version.
    const version = (
      JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
    ).version;
    const body = (await readyz.json()) as { status: string; service: string; version: string };
    assert.deepEqual(body, { status: "ready", service: body.service, version });
    assert.ok(body.service);
    assert.equal(((await (await fetch(`${url}/livez`)).json()) as { version: string }).version, version);
  });

  test("close() turns every service NOT_SERVING", async () => {
    const closing = server.close();
    assert.equal(server.health.get(""), S.NOT_SERVING);
    assert.equal(server.health.get("rpctest.v1.LibraryService"), S.NOT_SERVING);
    await closing;
  });
});
