import assert from "node:assert/strict";
import { test } from "node:test";
import { sseOf } from "@platform/rpc";
import { routesOf } from "./routes.ts";
import { contractServices } from "./services.ts";
import { WebhookEventService, WebhookService } from "@platform/gen/identity/v1/webhooks_pb";

// The identity REST table of the specification, row by row.
const identityTable = [
  ["POST", "/v1/auth/login", "*", 200],
  ["POST", "/v1/auth/refresh", "*", 200],
  ["POST", "/v1/auth/logout", "*", 204],
  ["POST", "/v1/auth/revoke-all", "*", 204],
  ["GET", "/v1/users/me", "", 200],
  ["GET", "/v1/users/me/api_keys", "", 200],
  ["POST", "/v1/users/me/api_keys", "*", 201],
  ["POST", "/v1/users/me/api_keys/{id}/revoke", "", 204],
  ["GET", "/v1/orgs/{id}", "", 200],
  ["PATCH", "/v1/orgs/{id}", "*", 200],
] as const;

// design.md's agents paths, plus the rejoin, cancel and management routes we added.
const agentsTable = [
  ["POST", "/v1/agents", "*", 201, false],
  ["GET", "/v1/agents", "", 200, false],
  ["GET", "/v1/agents/{id}", "", 200, false],
  ["PATCH", "/v1/agents/{id}", "*", 200, false],
  ["DELETE", "/v1/agents/{id}", "", 204, false],
  ["GET", "/v1/agents/{agent_id}/sessions", "", 200, false],
  ["POST", "/v1/sessions", "*", 201, false],
  ["GET", "/v1/sessions", "", 200, false],
  ["GET", "/v1/sessions/{id}", "", 200, false],
  ["DELETE", "/v1/sessions/{id}", "", 204, false],
  ["POST", "/v1/sessions/{id}/messages", "*", 200, true],
  ["GET", "/v1/sessions/{id}/events", "", 200, true],
  ["POST", "/v1/sessions/{id}/cancel", "", 200, false],
  // Issue 18: files of a session's workspace (additive).
  ["GET", "/v1/sessions/{id}/files", "", 200, false],
  ["GET", "/v1/sessions/{id}/files:read", "", 200, false],
  ["POST", "/v1/sessions/{id}/files:write", "*", 200, false],
  // Issue 20: answers to the tool calls a run paused on (additive).
  ["POST", "/v1/sessions/{id}/tool-decisions", "*", 200, false],
  // Issue 20: usage and budgets (agents.v1.UsageService, additive).
  ["GET", "/v1/sessions/{id}/usage", "", 200, false],
  ["GET", "/v1/usage", "", 200, false],
  ["PATCH", "/v1/sessions/{id}/budgets", "budgets", 200, false],
  // Issue 25: schedules of an agent (agents.v1.ScheduleService, additive).
  ["POST", "/v1/agents/{agent_id}/schedules", "*", 201, false],
  ["GET", "/v1/agents/{agent_id}/schedules", "", 200, false],
  ["GET", "/v1/schedules/{id}", "", 200, false],
  ["PATCH", "/v1/schedules/{id}", "*", 200, false],
  ["DELETE", "/v1/schedules/{id}", "", 204, false],
  ["GET", "/v1/schedules/{id}/firings", "", 200, false],
] as const;

test("every identity REST row is annotated with its method, path, body and status", () => {
  const routes = routesOf(contractServices.identity);
  for (const [verb, path, body, status] of identityTable) {
    const matches = routes.filter((r) => r.verb === verb && r.path === path);
    assert.equal(matches.length, 1, `${verb} ${path} bound once`);
    assert.equal(matches[0].body, body, `${verb} ${path} body`);
    assert.equal(matches[0].status, status, `${verb} ${path} status`);
  }
  assert.equal(routes.length, identityTable.length, "no identity route beyond the table");
});

test("the identity gRPC surface has the five AuthService RPCs and no REST binding", () => {
  const [auth] = contractServices.identity;
  assert.deepEqual(
    auth.methods.map((m) => m.name),
    ["VerifyAPIKey", "VerifyJWT", "IssueJWT", "GetPublicKey", "VerifyToken"],
  );
  assert.deepEqual(routesOf([auth]), []);
});

test("identity's webhooks (issue 25): the REST routes of WebhookService; WebhookEventService has none (internal port only)", () => {
  assert.deepEqual(
    routesOf([WebhookService]).map((r) => [r.verb, r.path, r.body, r.status]),
    [
      ["POST", "/v1/orgs/{org_id}/webhooks", "*", 201],
      ["GET", "/v1/orgs/{org_id}/webhooks", "", 200],
      ["GET", "/v1/orgs/{org_id}/webhooks/{id}", "", 200],
      ["PATCH", "/v1/orgs/{org_id}/webhooks/{id}", "*", 200],
      ["DELETE", "/v1/orgs/{org_id}/webhooks/{id}", "", 204],
      ["POST", "/v1/orgs/{org_id}/webhooks/{id}/rotate-secret", "", 200],
      ["GET", "/v1/orgs/{org_id}/webhooks/{id}/deliveries", "", 200],
      ["POST", "/v1/orgs/{org_id}/webhooks/{id}/deliveries/{delivery_id}/redeliver", "", 202],
    ],
  );
  assert.deepEqual(
    WebhookEventService.methods.map((m) => m.name),
    ["PublishWebhookEvents"],
  );
  assert.deepEqual(routesOf([WebhookEventService]), []);
});

test("every agents path of design.md exists; send-messages is a server stream served as SSE", () => {
  const routes = routesOf(contractServices.agents);
  for (const [verb, path, body, status, isSse] of agentsTable) {
    const r = routes.find((x) => x.verb === verb && x.path === path);
    assert.ok(r, `${verb} ${path}`);
    assert.equal(r.body, body, `${verb} ${path} body`);
    assert.equal(r.status, status, `${verb} ${path} status`);
    assert.equal(r.sse, isSse, `${verb} ${path} sse`);
  }
  assert.equal(routes.length, agentsTable.length, "no agents route beyond the table");
  const send = contractServices.agents[1].methods.find((m) => m.name === "SendMessages");
  assert.equal(send?.methodKind, "server_streaming");
  // Both session lists are one RPC: the org's, or one agent's by path.
  assert.deepEqual(
    routes.filter((r) => r.rpc === "agents.v1.SessionService/ListSessions").map((r) => r.path),
    ["/v1/sessions", "/v1/agents/{agent_id}/sessions"],
  );
});

test("the runtime router's public invoke route is RuntimeService.Invoke, streamed as SSE", () => {
  const [route] = routesOf(contractServices.runtime);
  assert.deepEqual(
    { verb: route.verb, path: route.path, sse: route.sse, rpc: route.rpc },
    { verb: "POST", path: "/v1/sessions/{session_id}/invoke", sse: true, rpc: "runtime.v1.RuntimeService/Invoke" },
  );
  assert.equal(contractServices.runtime[0].methods[0].methodKind, "server_streaming");
});

test("compute is gRPC only, with the seven v1 RPCs (and issue 18's additive pause and resume) and no ExecSession", () => {
  const [compute] = contractServices.compute;
  assert.deepEqual(
    compute.methods.map((m) => [m.name, m.methodKind]),
    [
      ["CreateSandbox", "unary"],
      ["DescribeSandbox", "unary"],
      ["DestroySandbox", "unary"],
      ["ExecCommand", "server_streaming"],
      ["ReadFile", "unary"],
      ["WriteFile", "unary"],
      ["ListFiles", "unary"],
      // Additive (issue 18): explicit control of the idle pause.
      ["PauseSandbox", "unary"],
      ["ResumeSandbox", "unary"],
      // Additive (issue 21): sandbox network policy and its log.
      ["UpdateNetworkPolicy", "unary"],
      ["ListNetworkEvents", "unary"],
      // Additive (issue 22): the local driver's sandbox images.
      ["ImportImage", "unary"],
      ["ListImages", "unary"],
      ["DeleteImage", "unary"],
      ["BuildImage", "unary"],
      // Additive (issue 27): input and terminal size for a running exec (unary: gRPC-Web and JSON clients too).
      ["SendExecInput", "unary"],
      ["ResizeExecTerminal", "unary"],
    ],
  );
  assert.deepEqual(routesOf([compute]), []);
});

test("the agents SSE data carry the specification's six fields, plus queuedSeq (issue 20, additive)", () => {
  for (const name of ["SendMessages", "StreamEvents"]) {
    const method = contractServices.agents[1].methods.find((m) => m.name === name);
    assert.ok(method, name);
    assert.deepEqual(
      sseOf(method)?.dataFields,
      ["type", "content", "tokens_in", "tokens_out", "tool_use_id", "is_error", "queued_seq"],
      name,
    );
  }
});
