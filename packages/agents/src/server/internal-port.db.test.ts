// The agents service's two ports with mutual TLS from a throw-away PKI: the
// public port carries REST/SSE only; the internal port answers gRPC to the
// runtime's tenant workers (and the operator) only; its calls to identity
// present the agents certificate. Identity is a stand-in on @platform/rpc's
// real mTLS listener, which refuses any caller but agents.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type ServiceImpl } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { InternalReason, PlatformError } from "@platform/errors";
import { AgentService } from "@platform/gen/agents/v1/agents_pb";
import { AuthContextSchema, AuthMode, AuthService, Role } from "@platform/gen/identity/v1/auth_pb";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import {
  codeNameEnvelope,
  createServer,
  createServiceTransport,
  fromConnectError,
  loadServiceTls,
  requestInfo,
  type Server,
} from "@platform/rpc";
import pino from "pino";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { createAgentsTestDatabase } from "../testing/database.ts";

let pki: TestPki;
let identity: Server;
let service: AgentsServer;
let database: Awaited<ReturnType<typeof createAgentsTestDatabase>>;
let base = "";
let grpcBase = "";
const identityCallers: string[] = [];
const orgId = randomUUID();
const userId = randomUUID();
// The compact JWS shape the agents service accepts before asking identity.
const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
const token = `${part({ alg: "RS256", typ: "JWT" })}.${part({ sub: userId, org_id: orgId })}.${randomBytes(32).toString("base64url")}`;
const bearer = { authorization: `Bearer ${token}` };
const tls = (name: string) => loadServiceTls(pki.env(name), name);
const identityImpl: Partial<ServiceImpl<typeof AuthService>> = {
  verifyToken(req, ctx) {
    identityCallers.push(requestInfo(ctx)?.caller ?? "");
    if (req.token.replace(/^Bearer /, "") !== token) throw PlatformError.unauthenticated("invalid credentials");
    return {
      context: create(AuthContextSchema, {
        userId,
        orgId,
        mode: AuthMode.JWT,
        role: Role.OWNER,
        method: "jwt_session",
      }),
    };
  },
};

before(async () => {
  pki = await makeTestPki(["agents", "identity", "compute", "runtime-worker", "runtime-router", "operator"]);
  identity = createServer({
    name: "identity-stand-in",
    // Called over gRPC only: no REST body is rendered.
    envelope: codeNameEnvelope("identity-stand-in"),
    logger: pino({ level: "silent" }),
    internal: { tls: tls("identity"), callers: { "identity.v1.AuthService": ["agents"] } },
    services: [
      {
        service: AuthService,
        impl: identityImpl,
      },
    ],
  });
  const identityUrl = (await identity.listen()).url;
  database = await createAgentsTestDatabase();
  service = await createAgentsServer(
    {
      port: 0,
      grpcPort: 0,
      host: "127.0.0.1",
      dataDir: "",
      identityGrpcUrl: identityUrl,
      // No tool call here: nothing needs to listen.
      computeGrpcUrl: "https://127.0.0.1:9",
      toolTimeoutMs: 5000,
      toolOutputLimitBytes: 16384,
      maxModelCalls: 10,
      maxTokens: 1024,
      runLeaseMs: 5000,
      logLevel: "silent",
    },
    pino({ level: "silent" }),
    {
      providers: new ProviderRegistry().register("dev", new DevModel()),
      database,
      pollMs: 200,
      internalTls: tls("agents"),
    },
  );
  ({ url: base, grpcUrl: grpcBase } = await service.listen());
});
after(async () => {
  await service?.close();
  await identity?.close();
  await database?.close();
  pki.remove();
});

const agentsAs = (caller: string) =>
  createClient(AgentService, createServiceTransport({ baseUrl: grpcBase, tls: tls(caller), expectServer: "agents" }));

test("the public port serves REST (identity called with the agents certificate) and refuses gRPC", async () => {
  assert.match(base, /^http:/);
  const res = await fetch(`${base}/v1/agents`, {
    method: "POST",
    headers: { ...bearer, "content-type": "application/json" },
    body: JSON.stringify({ name: "tls", slug: `tls-${randomUUID().slice(0, 8)}`, model: "dev/echo" }),
  });
  assert.equal(res.status, 201, await res.clone().text());
  assert.ok(identityCallers.length > 0 && identityCallers.every((c) => c === "agents"), identityCallers.join(","));
  assert.equal((await fetch(`${base}/readyz`)).status, 200);
  const grpc = createClient(AgentService, createGrpcTransport({ baseUrl: base }));
  await assert.rejects(
    grpc.listAgents({}, { headers: bearer }),
    (e: unknown) => ConnectError.from(e).code === Code.Unimplemented,
  );
  const connect = await fetch(`${base}/agents.v1.AgentService/ListAgents`, {
    method: "POST",
    headers: { ...bearer, "content-type": "application/json" },
    body: "{}",
  });
  assert.equal(connect.status, 404);
});

test("the internal port answers the tenant workers and the operator (bearer still required), no other service", async () => {
  assert.match(grpcBase, /^https:/);
  const listed = await agentsAs("runtime-worker").listAgents({}, { headers: bearer });
  assert.ok(listed.items.length >= 1);
  assert.ok((await agentsAs("operator").listAgents({}, { headers: bearer })).items.length >= 1);
  await assert.rejects(
    agentsAs("runtime-worker").listAgents({}),
    (e: unknown) => ConnectError.from(e).code === Code.Unauthenticated,
  );
  for (const caller of ["runtime-router", "compute", "identity"]) {
    await assert.rejects(agentsAs(caller).listAgents({}, { headers: bearer }), (e: unknown) => {
      const pe = fromConnectError(e);
      return pe.code === Code.PermissionDenied && pe.reason === InternalReason.callerNotAllowed;
    });
  }
  const pem = pki.pem("runtime-worker");
  const noCert = createClient(
    AgentService,
    createGrpcTransport({
      baseUrl: grpcBase,
      sessionManager: new Http2SessionManager(grpcBase, undefined, { ca: pem.ca }),
    }),
  );
  await assert.rejects(noCert.listAgents({}, { headers: bearer }), /certificate required/);
});
