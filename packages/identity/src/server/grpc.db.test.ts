// The gRPC side through the real server: AuthService over HTTP/2 gRPC on the
// internal (mutual TLS) port with reasons as ErrorInfo, only to the callers
// IDENTITY_CALLERS names, and never on the public port.
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import { after, before, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { AuthReason, IdentityRestCode, InternalReason } from "@platform/errors";
import { AuthMode, AuthService, Role } from "@platform/gen/identity/v1/auth_pb";
import { SessionService } from "@platform/gen/identity/v1/rest_pb";
import { Health, HealthCheckResponse_ServingStatus } from "@platform/gen/grpc/health/v1/health_pb";
import { ServerReflection } from "@platform/gen/grpc/reflection/v1/reflection_pb";
import { createServiceTransport, fromConnectError } from "@platform/rpc";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
let grpc: ReturnType<typeof createClient<typeof AuthService>>;
let operator: ReturnType<typeof createClient<typeof AuthService>>;
before(async () => {
  s = await startTestServer();
  grpc = createClient(AuthService, s.grpcTransport("agents"));
  operator = createClient(AuthService, s.grpcTransport("operator"));
});

/** GET over HTTP/2 + TLS with `caller`'s certificate (undefined: none); the status, or the connection's error. */
function tlsGet(url: string, path: string, caller: string | undefined): Promise<number | Error> {
  const pem = s.pki.pem(caller ?? "agents");
  return new Promise((resolve) => {
    const session = http2.connect(url, caller ? { ca: pem.ca, cert: pem.cert, key: pem.key } : { ca: pem.ca });
    session.on("error", resolve);
    const req = session.request({ ":path": path });
    req.on("response", (h) => {
      resolve(Number(h[":status"]));
      session.close();
    });
    req.on("error", (e) => {
      resolve(e);
      session.destroy();
    });
    req.end();
  });
}
after(() => s.close());

async function reason(p: Promise<unknown>) {
  const err = await p.then(
    () => assert.fail("expected an error"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConnectError);
  const pe = fromConnectError(err);
  return { code: err.code, reason: pe.reason };
}

test("VerifyToken / VerifyJWT / IssueJWT / GetPublicKey over gRPC on IDENTITY_GRPC_PORT", async () => {
  const pair = await s.login();
  const ctx = (await grpc.verifyToken({ token: `Bearer ${pair.access_token}` })).context!;
  assert.equal(ctx.mode, AuthMode.JWT);
  assert.equal(ctx.role, Role.OWNER);
  assert.equal(ctx.method, "jwt_session");
  const issued = await operator.issueJWT({ userId: ctx.userId, orgId: ctx.orgId, ttl: { seconds: 100_000n } });
  assert.equal(issued.expiresIn, 86_400n);
  assert.equal((await grpc.verifyJWT({ token: issued.accessToken })).context!.userId, ctx.userId);
  const pk = await grpc.getPublicKey({ kid: issued.kid });
  assert.ok(pk.der.length > 200);
});

test("reasons arrive as ErrorInfo over gRPC", async () => {
  assert.deepEqual(await reason(grpc.verifyJWT({ token: "x" })), {
    code: Code.Unauthenticated,
    reason: AuthReason.invalidCredentials,
  });
  assert.deepEqual(await reason(grpc.verifyAPIKey({ apiKey: "sk_test_x" })), {
    code: Code.Unauthenticated,
    reason: AuthReason.invalidCredentials,
  });
  assert.deepEqual(await reason(grpc.getPublicKey({ kid: "nope" })), {
    code: Code.NotFound,
    reason: AuthReason.kidUnknown,
  });
  const pair = await s.login();
  const ctx = (await grpc.verifyJWT({ token: pair.access_token })).context!;
  const stranger = await s.identity.orgs.create({ name: "Stranger" });
  assert.deepEqual(await reason(operator.issueJWT({ userId: ctx.userId, orgId: stranger.id })), {
    code: Code.PermissionDenied,
    reason: AuthReason.notAMember,
  });
});

test("the internal port is https and answers only the callers IDENTITY_CALLERS names", async () => {
  assert.match(s.grpcUrl, /^https:/);
  const pair = await s.login();
  const token = { token: pair.access_token };
  const ctx = (await grpc.verifyToken(token)).context!;
  const denied = { code: Code.PermissionDenied, reason: InternalReason.callerNotAllowed };
  // No service mints tokens: IssueJWT answers the operator only.
  for (const caller of ["agents", "runtime-router", "runtime-worker", "compute"]) {
    const client = createClient(AuthService, s.grpcTransport(caller));
    assert.deepEqual(await reason(client.issueJWT({ userId: ctx.userId, orgId: ctx.orgId })), denied, caller);
  }
  const router = createClient(AuthService, s.grpcTransport("runtime-router"));
  assert.equal((await router.verifyJWT(token)).context!.userId, ctx.userId);
  const worker = createClient(AuthService, s.grpcTransport("runtime-worker"));
  assert.deepEqual(await reason(worker.verifyToken(token)), denied);
  const compute = createClient(AuthService, s.grpcTransport("compute"));
  assert.deepEqual(await reason(compute.verifyJWT(token)), denied);
  // Without a client certificate the TLS handshake fails before any request.
  assert.ok((await tlsGet(s.grpcUrl, "/readyz", undefined)) instanceof Error);
  assert.equal(await tlsGet(s.grpcUrl, "/readyz", "compute"), 200);
});

test("gRPC health and reflection pass the auth interceptor on the internal port, for any certificate of the CA", async () => {
  const health = createClient(Health, s.grpcTransport("compute"));
  assert.equal((await health.check({ service: "" })).status, HealthCheckResponse_ServingStatus.SERVING);
  assert.equal(
    (await health.check({ service: SessionService.typeName })).status,
    HealthCheckResponse_ServingStatus.SERVING,
  );
  assert.equal(
    (await health.check({ service: AuthService.typeName })).status,
    HealthCheckResponse_ServingStatus.SERVING,
  );
  // The public port carries REST only: no gRPC health there (its /livez, /readyz stay).
  const pubHealth = createClient(Health, createServiceTransport({ baseUrl: s.base }));
  assert.equal((await reason(pubHealth.check({ service: "" }))).code, Code.Unimplemented);
  const reflection = createClient(ServerReflection, s.grpcTransport("operator"));
  const stream = reflection.serverReflectionInfo(
    (async function* () {
      yield { messageRequest: { case: "listServices" as const, value: "" } };
    })(),
  );
  const names: string[] = [];
  for await (const res of stream) {
    if (res.messageResponse.case === "listServicesResponse")
      names.push(...res.messageResponse.value.service.map((x) => x.name));
    break;
  }
  assert.ok(names.includes(AuthService.typeName), names.join(","));
});

test("the REST services are also gRPC on the internal port, for the operator, with the same reasons", async () => {
  const sessions = createClient(SessionService, s.grpcTransport("operator"));
  assert.deepEqual(await reason(sessions.refresh({})), {
    code: Code.InvalidArgument,
    reason: IdentityRestCode.refreshTokenRequired,
  });
  const asAgents = createClient(SessionService, s.grpcTransport("agents"));
  assert.equal((await reason(asAgents.refresh({}))).code, Code.PermissionDenied);
});

test("the public port serves the REST services as REST only", async () => {
  const sessions = createClient(SessionService, createServiceTransport({ baseUrl: s.base }));
  assert.equal((await reason(sessions.refresh({}))).code, Code.Unimplemented);
  const connect = await fetch(`${s.base}/identity.v1.SessionService/Refresh`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  assert.equal(connect.status, 404);
  assert.equal((await s.call("POST", "/v1/auth/refresh", { body: {} })).status, 400);
});

test("AuthService is not served on the public REST port", async () => {
  const pub = createClient(AuthService, createServiceTransport({ baseUrl: s.base }));
  const r = await reason(
    pub.issueJWT({ userId: "00000000-0000-4000-8000-000000000000", orgId: "00000000-0000-4000-8000-000000000000" }),
  );
  assert.notEqual(r.code, Code.PermissionDenied);
  assert.ok([Code.Unimplemented, Code.NotFound].includes(r.code), `code ${Code[r.code]}`);
  const res = await fetch(`${s.base}/identity.v1.AuthService/IssueJWT`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  assert.ok(res.status === 404 || res.status === 405, String(res.status));
});

test("50 concurrent identical REST requests with one Idempotency-Key run the handler once", async () => {
  const pair = await s.login();
  let runs = 0;
  const create = s.identity.apiKeys.create.bind(s.identity.apiKeys);
  s.identity.apiKeys.create = (...args) => {
    runs++;
    return create(...args);
  };
  const results = await Promise.all(
    Array.from({ length: 50 }, () =>
      s.call("POST", "/v1/users/me/api_keys", {
        token: pair.access_token,
        idem: "rest-burst",
        body: { name: "burst" },
      }),
    ),
  );
  s.identity.apiKeys.create = create;
  assert.equal(runs, 1);
  const statuses = results.map((r) => r.status);
  assert.ok(
    statuses.every((x) => x === 201 || x === 409),
    JSON.stringify(statuses),
  );
  for (const r of results.filter((x) => x.status === 409))
    assert.equal(r.json.code, IdentityRestCode.idempotencyKeyInUse);
  const ok = results.filter((x) => x.status === 201);
  assert.equal(new Set(ok.map((r) => r.json.id)).size, 1);
});

test("100 concurrent REST refreshes of one token: one 200, 99 × 401 refresh_token_reused", async () => {
  const pair = await s.login();
  const results = await Promise.all(
    Array.from({ length: 100 }, () =>
      s.call("POST", "/v1/auth/refresh", { body: { refresh_token: pair.refresh_token } }),
    ),
  );
  const statuses = results.map((r) => r.status);
  assert.equal(statuses.filter((x) => x === 200).length, 1, JSON.stringify(statuses));
  const rest = results.filter((r) => r.status !== 200);
  assert.equal(rest.length, 99);
  for (const r of rest) {
    assert.equal(r.status, 401);
    assert.equal(r.json.code, IdentityRestCode.refreshTokenReused);
    assert.equal(r.json.action, "re_authenticate");
  }
});

test("/readyz turns 503 when the database is unreachable; /livez stays 200 (runs last: closes the database)", async () => {
  assert.equal((await s.call("GET", "/readyz")).status, 200);
  await s.database.close();
  assert.equal((await s.call("GET", "/readyz")).status, 503);
  assert.equal((await s.call("GET", "/livez")).status, 200);
  assert.equal(await tlsGet(s.grpcUrl, "/readyz", "operator"), 503);
});
