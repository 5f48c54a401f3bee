// test-timeout: 600000
// Property test over the whole contract (issue 14 items 3 and 6): every RPC of
// every platform service, enumerated from the generated descriptors in gen/
// (a new RPC or service is covered without touching this file), gets U+0000,
// a lone surrogate and a 100,000-character string in each of its string
// fields, one field at a time, the other fields from a valid baseline; over
// REST (every google.api.http route) and over gRPC, with a valid credential.
// Never a 5xx, never INTERNAL/UNKNOWN, never an internal error event, and
// nothing with a hostile value in any service's database.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  create,
  type DescMethod,
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type DescService,
  type Message,
  type MessageInitShape,
  toJson,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { collectRoutes, type Route } from "@platform/rpc";
import { restRequest } from "./hostile/rest-request.ts";
import { type Stack, startStack } from "./hostile/stack.ts";
import { stringSlots } from "./hostile/string-slots.ts";

const genRoot = new URL("../../../../gen/", import.meta.url).pathname;
/** gen/ directories that are not platform services (third-party protos, the rpc package's test contract). */
// openapi: the OpenAPI documents generated from the same protos (JSON, no code).
// e2b: E2B's envd wire contract, served by the optional e2b-compat service (off unless PLATFORM_E2B_PORT),
// which this stack does not start; its own hostile-input test walks it (packages/e2b-compat).
const NOT_PLATFORM = new Set(["google", "grpc", "platform", "rpctest", "node_modules", "openapi", "e2b"]);

/** Every service in the generated code of the platform's proto packages. */
async function platformServices(): Promise<DescService[]> {
  const services: DescService[] = [];
  for (const pkg of readdirSync(genRoot, { withFileTypes: true })) {
    if (!pkg.isDirectory() || NOT_PLATFORM.has(pkg.name)) continue;
    for (const version of readdirSync(join(genRoot, pkg.name))) {
      for (const file of readdirSync(join(genRoot, pkg.name, version)).filter((f) => f.endsWith("_pb.ts"))) {
        const mod = (await import(join(genRoot, pkg.name, version, file))) as Record<string, unknown>;
        for (const v of Object.values(mod)) {
          if (v && typeof v === "object" && (v as { kind?: string }).kind === "service")
            services.push(v as DescService);
        }
      }
    }
  }
  return services;
}

const NUL = "hostile\u0000nul";
const LONE = "hostile\ud800lone";
const LONG = "L".repeat(100_000);
/** Columns that may hold a 100,000-character string: each has a larger bound of its own. */
const LONG_ALLOWED = new Set([
  // agents: a message's content is bounded at 512 KiB (MAX_MESSAGE_BYTES); the dev model echoes it.
  "agents.session_events.content",
  // agents: a schedule's message has the same bound (issue 25).
  "agents.agent_schedules.message",
]);
const HOSTILE: Array<[string, string]> = [
  ["U+0000", NUL],
  ["lone surrogate", LONE],
  ["100k chars", LONG],
];

interface Ids {
  token: string;
  userId: string;
  orgId: string;
  agentId: string;
  sessionId: string;
  sandboxId: string;
  apiKeyId: string;
  scheduleId: string;
  webhookId: string;
}

/**
 * Valid requests, where a field other than the one under test must be right
 * to get past the first check. RPCs not listed start from the empty message.
 */
function baselines(ids: Ids): Record<string, () => MessageInitShape<never>> {
  const msgs = () => [{ role: "user", content: "hi" }];
  const table: Record<string, () => unknown> = {
    "identity.v1.SessionService/Login": () => ({
      email: "owner@example.com",
      password: "owner-password-1",
      xDeviceLabel: "laptop",
    }),
    "identity.v1.UserService/CreateAPIKey": () => ({ name: "key", env: "live" }),
    "identity.v1.UserService/RevokeAPIKey": () => ({ id: ids.apiKeyId }),
    "identity.v1.OrgService/GetOrg": () => ({ id: ids.orgId }),
    "identity.v1.OrgService/UpdateOrg": () => ({ id: ids.orgId, name: "Acme Inc" }),
    "identity.v1.AuthService/IssueJWT": () => ({ userId: ids.userId, orgId: ids.orgId }),
    "identity.v1.SessionService/RevokeAll": () => ({ userId: randomUUID() }),
    // Teams (issue 19): routes under /v1/orgs/{org_id} need the caller's org to reach their handler.
    "identity.v1.MemberService/CreateInvitation": () => ({
      orgId: ids.orgId,
      email: "hostile-invitee@example.com",
      role: "member",
    }),
    "identity.v1.MemberService/ListInvitations": () => ({ orgId: ids.orgId }),
    "identity.v1.MemberService/RevokeInvitation": () => ({ orgId: ids.orgId, id: randomUUID() }),
    "identity.v1.MemberService/ListMembers": () => ({ orgId: ids.orgId }),
    "identity.v1.MemberService/UpdateMember": () => ({ orgId: ids.orgId, userId: randomUUID(), role: "member" }),
    "identity.v1.MemberService/RemoveMember": () => ({ orgId: ids.orgId, userId: randomUUID() }),
    "identity.v1.AuditService/ListAuditEvents": () => ({ orgId: ids.orgId }),
    "identity.v1.OrgAPIKeyService/ListOrgAPIKeys": () => ({ orgId: ids.orgId }),
    "identity.v1.OrgAPIKeyService/RevokeOrgAPIKey": () => ({ orgId: ids.orgId, id: randomUUID() }),
    // Webhooks (issue 25).
    "identity.v1.WebhookService/CreateWebhook": () => ({
      orgId: ids.orgId,
      url: "https://hooks.example.com/baseline",
      eventTypes: ["session.idle"],
    }),
    "identity.v1.WebhookService/ListWebhooks": () => ({ orgId: ids.orgId }),
    "identity.v1.WebhookService/GetWebhook": () => ({ orgId: ids.orgId, id: ids.webhookId }),
    "identity.v1.WebhookService/UpdateWebhook": () => ({ orgId: ids.orgId, id: ids.webhookId }),
    "identity.v1.WebhookService/DeleteWebhook": () => ({ orgId: ids.orgId, id: randomUUID() }),
    "identity.v1.WebhookService/RotateWebhookSecret": () => ({ orgId: ids.orgId, id: ids.webhookId }),
    "identity.v1.WebhookService/ListWebhookDeliveries": () => ({ orgId: ids.orgId, id: ids.webhookId }),
    "identity.v1.WebhookService/RedeliverWebhookDelivery": () => ({
      orgId: ids.orgId,
      id: ids.webhookId,
      deliveryId: randomUUID(),
    }),
    "identity.v1.WebhookEventService/PublishWebhookEvents": () => ({
      events: [
        {
          id: randomUUID(),
          orgId: ids.orgId,
          type: "session.idle",
          occurredAt: { seconds: BigInt(Math.floor(Date.now() / 1000)), nanos: 0 },
        },
      ],
    }),
    "agents.v1.AgentService/CreateAgent": () => ({
      name: "a",
      slug: `s-${randomUUID().slice(0, 8)}`,
      model: "dev/echo",
      systemPrompt: "be brief",
    }),
    "agents.v1.AgentService/GetAgent": () => ({ id: ids.agentId }),
    "agents.v1.AgentService/UpdateAgent": () => ({ id: ids.agentId }),
    "agents.v1.SessionService/CreateSession": () => ({ agentId: ids.agentId }),
    "agents.v1.SessionService/ListSessions": () => ({ agentId: ids.agentId }),
    "agents.v1.SessionService/GetSession": () => ({ id: ids.sessionId }),
    // Issue 20: `mode` (enqueue, reject, interrupt; anything else 400) is one of its string slots.
    "agents.v1.SessionService/SendMessages": () => ({ id: ids.sessionId, messages: msgs(), mode: "enqueue" }),
    "agents.v1.SessionService/StreamEvents": () => ({ id: ids.sessionId }),
    "agents.v1.SessionService/CancelRun": () => ({ id: ids.sessionId }),
    "agents.v1.SessionService/SubmitToolDecisions": () => ({
      id: ids.sessionId,
      decisions: [{ toolUseId: "toolu_1", decision: "deny", message: "no" }],
    }),
    // Issue 20: usage and budgets.
    "agents.v1.UsageService/GetSessionUsage": () => ({ id: ids.sessionId }),
    "agents.v1.UsageService/GetUsage": () => ({ agentId: ids.agentId }),
    "agents.v1.UsageService/UpdateSessionBudgets": () => ({ id: ids.sessionId, budgets: { maxTokens: 100n } }),
    // Issue 25: schedules (a cron that does not fire during the test).
    "agents.v1.ScheduleService/CreateSchedule": () => ({ agentId: ids.agentId, cron: "0 0 1 1 *", message: "hi" }),
    "agents.v1.ScheduleService/ListSchedules": () => ({ agentId: ids.agentId }),
    "agents.v1.ScheduleService/GetSchedule": () => ({ id: ids.scheduleId }),
    "agents.v1.ScheduleService/UpdateSchedule": () => ({ id: ids.scheduleId }),
    "agents.v1.ScheduleService/DeleteSchedule": () => ({ id: ids.scheduleId }),
    "agents.v1.ScheduleService/ListScheduleFirings": () => ({ id: ids.scheduleId }),
    // Issue 18: a session's workspace files; the path is checked before compute is asked.
    "agents.v1.SessionService/ListSessionFiles": () => ({ id: ids.sessionId, path: "." }),
    "agents.v1.SessionService/ReadSessionFile": () => ({ id: ids.sessionId, path: "f.txt" }),
    "agents.v1.SessionService/WriteSessionFile": () => ({
      id: ids.sessionId,
      path: "f.txt",
      data: new Uint8Array([104, 105]),
    }),
    "compute.v1.ComputeService/CreateSandbox": () => ({ tenantId: ids.orgId, sessionId: randomUUID() }),
    "compute.v1.ComputeService/DescribeSandbox": () => ({ sandboxId: ids.sandboxId }),
    "compute.v1.ComputeService/DestroySandbox": () => ({ sandboxId: randomUUID() }),
    "compute.v1.ComputeService/ExecCommand": () => ({ sandboxId: ids.sandboxId, command: "/bin/true" }),
    "compute.v1.ComputeService/ReadFile": () => ({ sandboxId: ids.sandboxId, path: "f.txt" }),
    "compute.v1.ComputeService/WriteFile": () => ({
      sandboxId: ids.sandboxId,
      path: "f.txt",
      data: new Uint8Array([104, 105]),
    }),
    "compute.v1.ComputeService/ListFiles": () => ({ sandboxId: ids.sandboxId, path: "." }),
    // Issue 22: the image store (no BuildImage baseline: a valid one would download Debian).
    "compute.v1.ComputeService/ImportImage": () => ({ name: "hostile:1", path: "/nonexistent/image.tar" }),
    "compute.v1.ComputeService/DeleteImage": () => ({ name: "hostile:1" }),
    "runtime.v1.RuntimeService/Invoke": () => ({ sessionId: ids.sessionId, messages: msgs() }),
  };
  return table as Record<string, () => MessageInitShape<never>>;
}

/** Where a service is reached, with what metadata. */
interface Endpoint {
  name: string;
  /** The internal gRPC address, if the service has one. */
  grpc?: string;
  rest?: string;
  headers: Record<string, string>;
}

/** Text of a JavaScript exception, a socket error or the database: never for a caller's eyes (item 6). */
const LEAK =
  /TypeError|RangeError|ReferenceError|SyntaxError|Cannot (read|convert)|is not a function|ECONN\w+|ByteString|violates .*constraint|invalid byte sequence|duplicate key|relation "/;

/** An error event in a stream message that hides a server fault. */
function internalEvent(message: Message, method: DescMethod): string | undefined {
  const text = JSON.stringify(toJson(method.output, message));
  return /internal error|agents call failed"|unknown error/i.test(text) || LEAK.test(text)
    ? text.slice(0, 200)
    : undefined;
}

/** A call's answer: the gRPC code (0 for OK) or the HTTP status, and what was wrong with it, if anything. */
type Outcome = { code: number; fault?: string };

async function grpcCall(
  transport: Transport,
  method: DescMethod,
  headers: Record<string, string>,
  input: Message,
): Promise<Outcome> {
  try {
    if (method.methodKind === "unary") {
      await transport.unary(method as DescMethodUnary, undefined, 30_000, headers, input as never, undefined);
      return { code: 0 };
    }
    if (method.methodKind !== "server_streaming") return { code: 0 };
    const res = await transport.stream(
      method as DescMethodServerStreaming,
      undefined,
      30_000,
      headers,
      createAsyncIterable([input as never]),
      undefined,
    );
    for await (const m of res.message) {
      const why = internalEvent(m as Message, method);
      if (why) return { code: 0, fault: `error event ${why}` };
    }
    return { code: 0 };
  } catch (e) {
    const ce = ConnectError.from(e);
    const fault =
      ce.code === Code.Internal || ce.code === Code.Unknown || ce.code === Code.DataLoss || LEAK.test(ce.rawMessage)
        ? `${Code[ce.code]}: ${ce.rawMessage.slice(0, 200)}`
        : undefined;
    return { code: ce.code, fault };
  }
}

async function restCall(base: string, route: Route, headers: Record<string, string>, input: Message): Promise<Outcome> {
  const r = restRequest(route, input);
  const res = await fetch(base + r.path, {
    method: r.method,
    headers: {
      ...headers,
      ...(r.body !== undefined ? { "content-type": "application/json" } : {}),
      ...(route.sse ? { accept: "text/event-stream" } : {}),
    },
    body: r.body,
  });
  const text = await res.text();
  if (res.status >= 500) return { code: res.status, fault: `HTTP ${res.status} ${text.slice(0, 200)}` };
  if (/internal error|agents call failed"/i.test(text) || LEAK.test(text))
    return { code: res.status, fault: `internal text in body: ${text.slice(0, 200)}` };
  return { code: res.status };
}

/**
 * What U+0000 gets where the contract names its own answer for an unknown
 * value; everywhere else INVALID_ARGUMENT and HTTP 400 (identity's
 * `invalid_request`, the others' `invalid_argument`).
 */
const NUL_ANSWERS: Record<string, { grpc: Code | 0; http?: number }> = {
  "identity.v1.AuthService/GetPublicKey": { grpc: Code.NotFound },
  "identity.v1.AuthService/VerifyJWT": { grpc: Code.Unauthenticated },
  "identity.v1.AuthService/VerifyAPIKey": { grpc: Code.Unauthenticated },
  "identity.v1.AuthService/VerifyToken": { grpc: Code.Unauthenticated },
  "identity.v1.SessionService/Refresh": { grpc: Code.Unauthenticated, http: 401 },
  "identity.v1.SessionService/Logout": { grpc: 0, http: 204 },
};

describe("hostile strings in every field of every RPC (REST and gRPC, all four services)", { timeout: 170_000 }, () => {
  let stack: Stack;
  let ids: Ids;
  let services: DescService[];
  const endpoints = new Map<string, Endpoint[]>();

  before(async () => {
    services = await platformServices();
    stack = await startStack();
    const login = await stack.identity.login();
    const me = await stack.identity.call("GET", "/v1/users/me", { token: login.access_token });
    const claims = JSON.parse(Buffer.from(login.access_token.split(".")[1]!, "base64url").toString()) as {
      org_id: string;
      sub: string;
    };
    const token = login.access_token;
    const auth = { authorization: `Bearer ${token}` };
    const key = await stack.identity.call("POST", "/v1/users/me/api_keys", {
      token,
      idem: randomUUID(),
      body: { name: "baseline" },
    });
    assert.equal(key.status, 201, key.text);
    const hook = await stack.identity.call("POST", `/v1/orgs/${claims.org_id}/webhooks`, {
      token,
      idem: randomUUID(),
      body: { url: "https://hooks.example.com/baseline", event_types: ["session.idle"] },
    });
    assert.equal(hook.status, 201, hook.text);
    const agentsJson = async (path: string, body: unknown) => {
      const r = await fetch(stack.agentsUrl + path, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assert.equal(r.status, 201, await r.clone().text());
      return (await r.json()) as { id: string };
    };
    const agent = await agentsJson("/v1/agents", { name: "baseline", slug: "baseline", model: "dev/echo" });
    const session = await agentsJson("/v1/sessions", { agentId: agent.id });
    const schedule = await agentsJson(`/v1/agents/${agent.id}/schedules`, { cron: "0 0 1 1 *", message: "baseline" });
    // A live sandbox for the exec and file RPCs; a first invoke wakes the tenant's worker.
    const compute = stack.transport(stack.computeUrl, true);
    const { ComputeService } = await import("@platform/gen/compute/v1/compute_pb");
    const created = await compute.unary(
      ComputeService.method.createSandbox,
      undefined,
      30_000,
      undefined,
      create(ComputeService.method.createSandbox.input, { tenantId: claims.org_id, sessionId: session.id }),
      undefined,
    );
    const woke = await fetch(`${stack.router.url}/v1/sessions/${session.id}/invoke`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "wake" }] }),
    });
    assert.equal(woke.status, 200, await woke.clone().text());
    await woke.text();
    ids = {
      token,
      userId: (me.json as { id: string }).id ?? claims.sub,
      orgId: claims.org_id,
      agentId: agent.id,
      sessionId: session.id,
      sandboxId: created.message.sandboxId,
      apiKeyId: (key.json as { id: string }).id,
      scheduleId: schedule.id,
      webhookId: (hook.json as { webhook: { id: string } }).webhook.id,
    };
    const [deployment] = await stack.orchestrator.listDeployments({});
    const workerUrl = deployment ? await stack.orchestrator.endpoint(deployment.name) : undefined;
    assert.ok(workerUrl, "the tenant's worker is running");
    const tenant = { ...auth, "x-tenant-id": ids.orgId, "x-org-id": ids.orgId, "x-user-id": ids.userId };
    const identityHeaders = () => ({ ...auth, "idempotency-key": randomUUID() });
    endpoints.set("identity", [
      { name: "identity", grpc: stack.identity.grpcUrl, rest: stack.identity.base, headers: identityHeaders() },
    ]);
    endpoints.set("agents", [{ name: "agents", grpc: stack.agentsGrpcUrl, rest: stack.agentsUrl, headers: auth }]);
    endpoints.set("compute", [{ name: "compute", grpc: stack.computeUrl, headers: {} }]);
    endpoints.set("runtime", [
      // The router's port is public: REST/SSE only.
      { name: "router", rest: stack.router.url, headers: auth },
      { name: "tenant worker", grpc: workerUrl, headers: tenant },
    ]);
  });
  after(async () => {
    await stack?.close();
  });

  test("the generated descriptors hold the four services' RPCs", () => {
    const names = services.map((s) => s.typeName);
    for (const pkg of ["identity.v1", "agents.v1", "compute.v1", "runtime.v1"])
      assert.ok(
        names.some((n) => n.startsWith(`${pkg}.`)),
        pkg,
      );
  });

  test("never a 5xx, never INTERNAL/UNKNOWN, never an internal error event or exception text", async () => {
    const table = baselines(ids);
    const failures: string[] = [];
    let calls = 0;
    const started = Date.now();
    const transports = new Map<string, Transport>();
    const transportFor = (grpc: string, binary: boolean) => {
      const k = `${grpc} ${binary}`;
      let t = transports.get(k);
      if (!t) {
        t = stack.transport(grpc, binary);
        transports.set(k, t);
      }
      return t;
    };
    for (const service of services) {
      const pkg = service.typeName.split(".")[0]!;
      const targets = endpoints.get(pkg);
      assert.ok(targets, `no server for ${service.typeName}: add it to the endpoints of this test`);
      const routes = collectRoutes([service]);
      for (const method of service.methods) {
        const rpc = `${service.typeName}/${method.name}`;
        const baseline = table[rpc] ?? (() => ({}));
        for (const slot of stringSlots(method.input)) {
          for (const [label, value] of HOSTILE) {
            const message = () => {
              const m = create(method.input, baseline() as never);
              slot.put(m, value);
              return m;
            };
            for (const target of targets) {
              const headers =
                pkg === "identity" ? { ...target.headers, "idempotency-key": randomUUID() } : target.headers;
              // Binary gRPC cannot carry a lone surrogate (the encoder writes U+FFFD); gRPC's JSON codec can.
              const binary = value !== LONE;
              const want = value === NUL ? (NUL_ANSWERS[rpc] ?? { grpc: Code.InvalidArgument, http: 400 }) : undefined;
              const where = `${rpc} ${slot.path} ${label}`;
              if (target.grpc) {
                const g = await grpcCall(transportFor(target.grpc, binary), method, headers, message());
                calls++;
                if (g.fault) failures.push(`${where} gRPC(${target.name}): ${g.fault}`);
                else if (want && g.code !== want.grpc)
                  failures.push(
                    `${where} gRPC(${target.name}): ${Code[g.code] ?? "OK"}, wanted ${Code[want.grpc] ?? "OK"}`,
                  );
              }
              if (!target.rest) continue;
              for (const route of routes.filter((r) => r.method === method)) {
                const r = await restCall(target.rest, route, headers, message());
                calls++;
                const at = `${where} ${route.httpMethod} ${route.template.source}`;
                if (r.fault) failures.push(`${at}: ${r.fault}`);
                else if (want?.http && r.code !== want.http)
                  failures.push(`${at}: HTTP ${r.code}, wanted ${want.http}`);
              }
            }
          }
        }
      }
    }
    console.log(`hostile input: ${calls} calls in ${Date.now() - started} ms`);
    assert.deepEqual(failures, []);
  });

  test("nothing holding a hostile value was stored; a 100k string only where its column has a documented larger bound", async () => {
    const found: string[] = [];
    let sawBaseline = false;
    for (const [name, database] of Object.entries(stack.databases)) {
      const db = database.db as unknown as {
        introspection: { getTables(): Promise<Array<{ name: string; schema?: string }>> };
        selectFrom(t: string): { selectAll(): { execute(): Promise<Array<Record<string, unknown>>> } };
      };
      for (const t of await db.introspection.getTables()) {
        const table = t.schema && t.schema !== "public" ? `${t.schema}.${t.name}` : t.name;
        for (const row of await db.selectFrom(table).selectAll().execute()) {
          for (const [column, value] of Object.entries(row)) {
            const text =
              typeof value === "string"
                ? value
                : (JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? String(v) : v)) ?? "");
            if (text.includes("baseline")) sawBaseline = true;
            if (text.includes("hostile")) found.push(`${name}.${table}.${column}: ${text.slice(0, 120)}`);
            if (text.includes(LONG.slice(0, 1000)) && !LONG_ALLOWED.has(`${name}.${table}.${column}`)) {
              found.push(`${name}.${table}.${column}: a 100,000-character string was stored (add a length limit)`);
            }
          }
        }
      }
    }
    assert.ok(sawBaseline, "the scan reads the rows the baseline calls stored");
    assert.deepEqual(found, []);
  });
});
