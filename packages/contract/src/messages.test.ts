import assert from "node:assert/strict";
import { test } from "node:test";
import type { DescEnum, DescMessage } from "@bufbuild/protobuf";
import * as agents from "@platform/gen/agents/v1/agents_pb";
import * as schedules from "@platform/gen/agents/v1/schedules_pb";
import * as usage from "@platform/gen/agents/v1/usage_pb";
import * as compute from "@platform/gen/compute/v1/compute_pb";
import * as health from "@platform/gen/grpc/health/v1/health_pb";
import * as auth from "@platform/gen/identity/v1/auth_pb";
import * as rest from "@platform/gen/identity/v1/rest_pb";
import * as webhooks from "@platform/gen/identity/v1/webhooks_pb";
import * as runtime from "@platform/gen/runtime/v1/runtime_pb";

/** field name → JSON name of a message. */
const fields = (m: DescMessage) => Object.fromEntries(m.fields.map((f) => [f.name, f.jsonName]));
const names = (m: DescMessage) => m.fields.map((f) => f.name);
const values = (e: DescEnum) => e.values.map((v) => v.name);

test("compute messages carry every field the specification names", () => {
  assert.deepEqual(names(compute.WorkspaceSpecSchema), ["storage_class", "size", "mount_path"]);
  assert.deepEqual(names(compute.ResourceLimitsSchema), ["cpu_millis", "memory_bytes", "max_runtime"]);
  assert.deepEqual(names(compute.UsageMetricsSchema), [
    "cpu_ms",
    "memory_peak_bytes",
    "memory_avg_bytes",
    "disk_read_bytes",
    "disk_write_bytes",
    "network_egress_bytes",
    "network_ingress_bytes",
  ]);
  for (const f of compute.UsageMetricsSchema.fields) assert.equal(f.scalar, 4 /* uint64 */, f.name);
  assert.deepEqual(values(compute.SandboxStatusSchema), [
    "SANDBOX_STATUS_UNSPECIFIED",
    "SANDBOX_STATUS_STARTING",
    "SANDBOX_STATUS_READY",
    "SANDBOX_STATUS_FAILED",
    "SANDBOX_STATUS_DESTROYED",
    // Additive (issue 18: pause and resume), after the specification's values.
    "SANDBOX_STATUS_PAUSED",
  ]);
  assert.deepEqual(names(compute.FileEntrySchema), ["path", "size", "is_dir", "mode", "modified_at"]);
  assert.deepEqual(names(compute.ExecCompletedSchema), ["exit_code", "wall_time", "cancelled", "usage"]);
  const exec = compute.ExecEventSchema;
  assert.deepEqual(names(exec), ["emitted_at", "stdout", "stderr", "completed"]);
  assert.deepEqual(
    exec.oneofs.map((o) => [o.name, o.fields.map((f) => f.name)]),
    [["event", ["stdout", "stderr", "completed"]]],
  );
  // `idle_timeout` is additive (issue 18), after the specification's fields.
  assert.deepEqual(names(compute.CreateSandboxRequestSchema), [
    "tenant_id",
    "session_id",
    "image",
    "workspace",
    "limits",
    "idle_timeout",
    // Additive (issue 21), numbered from 20.
    "network_policy",
  ]);
  assert.equal(compute.CreateSandboxRequestSchema.field.networkPolicy?.number, 20);
  assert.deepEqual(names(compute.NetworkPolicySchema), ["allow_all", "allowed_domains", "allowed_cidrs"]);
  assert.deepEqual(names(compute.CidrRuleSchema), ["cidr", "ports"]);
  assert.deepEqual(names(compute.CreateSandboxResponseSchema), ["sandbox_id", "status", "created_at"]);
  assert.deepEqual(names(compute.DescribeSandboxResponseSchema), [
    "sandbox_id",
    "status",
    "created_at",
    "current_uptime",
    "current_usage",
    "network_policy",
  ]);
  assert.equal(compute.DescribeSandboxResponseSchema.field.networkPolicy?.number, 20);
  assert.deepEqual(names(compute.DestroySandboxResponseSchema), ["sandbox_id", "total_usage"]);
  assert.deepEqual(names(compute.ExecCommandRequestSchema), [
    "sandbox_id",
    "command",
    "args",
    "env",
    "working_dir",
    "timeout",
    // Additive (issue 27): input for the exec, numbered from 40.
    "exec_id",
    "stdin",
    "terminal",
  ]);
  assert.deepEqual(
    ["exec_id", "stdin", "terminal"].map(
      (n) => compute.ExecCommandRequestSchema.fields.find((f) => f.name === n)?.number,
    ),
    [40, 41, 42],
  );
  assert.deepEqual(names(compute.SendExecInputRequestSchema), ["sandbox_id", "exec_id", "data", "eof"]);
  assert.deepEqual(names(compute.ResizeExecTerminalRequestSchema), ["sandbox_id", "exec_id", "size"]);
  assert.deepEqual(names(compute.ExecTerminalSchema), ["rows", "cols"]);
  assert.deepEqual(names(compute.ReadFileRequestSchema), ["sandbox_id", "path", "offset", "max_bytes"]);
  assert.deepEqual(names(compute.ReadFileResponseSchema), ["data", "total_size", "eof"]);
  assert.deepEqual(names(compute.WriteFileRequestSchema), ["sandbox_id", "path", "data", "append", "mode"]);
  assert.deepEqual(names(compute.WriteFileResponseSchema), ["bytes_written"]);
  assert.deepEqual(names(compute.ListFilesRequestSchema), ["sandbox_id", "path", "recursive", "max_entries"]);
  assert.deepEqual(names(compute.ListFilesResponseSchema), ["entries", "truncated"]);
  // Images (issue 22): RPCs appended at the end of ComputeService, after the network ones, in new messages;
  // then exec input (issue 27).
  assert.deepEqual(
    compute.ComputeService.methods.slice(-6).map((m) => m.name),
    ["ImportImage", "ListImages", "DeleteImage", "BuildImage", "SendExecInput", "ResizeExecTerminal"],
  );
  assert.deepEqual(names(compute.SandboxImageSchema), ["name", "digest", "size_bytes", "created_at", "source"]);
  assert.deepEqual(names(compute.ImportImageRequestSchema), ["name", "path"]);
  assert.deepEqual(names(compute.ListImagesResponseSchema), [
    "images",
    "default_image",
    "default_is_host",
    "any_image",
  ]);
  assert.deepEqual(names(compute.DeleteImageRequestSchema), ["name"]);
  assert.deepEqual(names(compute.BuildImageRequestSchema), ["name", "packages", "suite"]);
});

test("identity JSON names are snake_case as the specification shows them", () => {
  assert.deepEqual(fields(rest.TokenPairSchema), {
    access_token: "access_token",
    token_type: "token_type",
    expires_in: "expires_in",
    refresh_token: "refresh_token",
  });
  assert.deepEqual(fields(rest.LoginRequestSchema), {
    email: "email",
    password: "password",
    x_device_label: "x_device_label",
  });
  assert.deepEqual(fields(rest.UserSchema), { id: "id", email: "email", name: "name", created_at: "created_at" });
  // `scopes`, `org` and `created_by` are additive (issue 19: API key scopes, organization keys), after the specification's fields.
  assert.deepEqual(Object.values(fields(rest.APIKeySchema)), [
    "id",
    "name",
    "key_prefix",
    "env",
    "expires_at",
    "last_used_at",
    "scopes",
    "org",
    "created_by",
  ]);
  assert.deepEqual(Object.values(fields(rest.CreateAPIKeyResponseSchema)), [
    "id",
    "key_prefix",
    "raw_key",
    "env",
    "expires_at",
    "scopes",
    "org",
  ]);
  assert.deepEqual(Object.values(fields(rest.OrganizationSchema)), ["id", "name", "slug", "created_at", "updated_at"]);
  assert.deepEqual(Object.values(fields(auth.AuthContextSchema)), [
    "user_id",
    "org_id",
    "mode",
    "role",
    "env",
    "auth_key_id",
    "api_key_id",
    "method",
    "scopes",
    "org_key",
  ]);
  assert.deepEqual(values(auth.AuthModeSchema), ["AUTH_MODE_UNSPECIFIED", "AUTH_MODE_JWT", "AUTH_MODE_API_KEY"]);
  assert.deepEqual(values(auth.RoleSchema), ["ROLE_UNSPECIFIED", "ROLE_OWNER", "ROLE_MEMBER"]);
  assert.deepEqual(values(auth.EnvSchema), ["ENV_UNSPECIFIED", "ENV_LIVE", "ENV_TEST"]);
  // Every multi-word identity field keeps its snake_case JSON name.
  for (const file of [rest.file_identity_v1_rest, auth.file_identity_v1_auth, webhooks.file_identity_v1_webhooks]) {
    for (const m of file.messages)
      for (const f of m.fields) assert.equal(f.jsonName, f.name, `${m.typeName}.${f.name}`);
  }
});

test("agents JSON names are camelCase", () => {
  assert.equal(fields(agents.AgentSchema).system_prompt, "systemPrompt");
  assert.equal(fields(agents.CreateSessionRequestSchema).agent_id, "agentId");
  assert.equal(fields(agents.MessageSchema).tool_use_id, "toolUseId");
  assert.equal(fields(agents.MessageSchema).is_error, "isError");
  assert.equal(fields(agents.SessionEventSchema).tokens_in, "tokensIn");
  assert.equal(fields(agents.SessionEventSchema).tokens_out, "tokensOut");
  // The specification's fields with their numbers; additions (issue 20) only from 20 on, the v1 extension range.
  assert.deepEqual(names(agents.CreateAgentRequestSchema).slice(0, 4), ["name", "slug", "model", "system_prompt"]);
  for (const schema of [agents.CreateAgentRequestSchema, agents.UpdateAgentRequestSchema, agents.AgentSchema])
    for (const f of schema.fields.slice(schema === agents.CreateAgentRequestSchema ? 4 : 0))
      if (!["name", "slug", "model", "system_prompt", "id", "created_at", "updated_at", "update_mask"].includes(f.name))
        assert.ok(f.number >= 20, `${schema.typeName}.${f.name} is an addition numbered ${f.number}`);
  assert.deepEqual(names(agents.ListAgentsResponseSchema), ["items", "next"]);
  assert.ok(
    agents.ListAgentsRequestSchema.fields.find((f) => f.name === "limit")?.proto.proto3Optional,
    "limit 0 is distinguishable",
  );
});

test("agents usage and budgets (issue 20): additions numbered as given, optional limits, camelCase", () => {
  const number = (schema: DescMessage, name: string) => schema.fields.find((f) => f.name === name)?.number;
  for (const schema of [agents.AgentSchema, agents.CreateAgentRequestSchema, agents.UpdateAgentRequestSchema])
    assert.equal(number(schema, "budgets"), 23, `${schema.typeName}.budgets`);
  assert.equal(number(agents.SessionSchema, "budgets"), 23);
  assert.equal(number(agents.CreateSessionRequestSchema, "budgets"), 20);
  assert.equal(number(agents.GetSessionResponseSchema, "usage"), 24);
  assert.equal(number(agents.GetSessionResponseSchema, "effective_budgets"), 25);
  for (const schema of [usage.BudgetsSchema, usage.BudgetsInputSchema]) {
    assert.deepEqual(names(schema), ["max_tokens", "max_tool_calls", "max_cpu_seconds"]);
    for (const f of schema.fields) assert.ok(f.proto.proto3Optional, `${schema.typeName}.${f.name}: absent ≠ 0`);
  }
  assert.equal(fields(usage.UsageSchema).sandbox_cpu_ms, "sandboxCpuMs");
  assert.deepEqual(
    usage.UsageService.methods.map((m) => m.name),
    ["GetSessionUsage", "GetUsage", "UpdateSessionBudgets"],
  );
});

test("GetSession pages its log (issue 26): additions numbered from 20 and 26, camelCase, the token optional", () => {
  const field = (schema: DescMessage, name: string) => schema.fields.find((f) => f.name === name);
  assert.deepEqual(names(agents.GetSessionRequestSchema), ["id", "page_size", "page_token"]);
  assert.equal(field(agents.GetSessionRequestSchema, "page_size")?.number, 20);
  assert.equal(field(agents.GetSessionRequestSchema, "page_size")?.scalar, 13 /* uint32 */);
  assert.equal(field(agents.GetSessionRequestSchema, "page_token")?.number, 21);
  assert.equal(fields(agents.GetSessionRequestSchema).page_size, "pageSize");
  assert.equal(fields(agents.GetSessionRequestSchema).page_token, "pageToken");
  // The response keeps the specification's `session` and `events` (1, 2) and its earlier additions.
  assert.deepEqual(names(agents.GetSessionResponseSchema), [
    "session",
    "events",
    "pending_tool_calls",
    "queued_sends",
    "usage",
    "effective_budgets",
    "next_page_token",
  ]);
  assert.equal(field(agents.GetSessionResponseSchema, "next_page_token")?.number, 26);
  assert.ok(field(agents.GetSessionResponseSchema, "next_page_token")?.proto.proto3Optional, "absent on the last page");
  assert.equal(fields(agents.GetSessionResponseSchema).next_page_token, "nextPageToken");
});

test("agents send modes and the message queue (issue 20 items 2 and 3): additions numbered as given, camelCase", () => {
  const field = (schema: DescMessage, name: string) => schema.fields.find((f) => f.name === name);
  assert.equal(field(agents.SendMessagesRequestSchema, "mode")?.number, 20);
  assert.equal(field(agents.SendMessagesRequestSchema, "mode")?.scalar, 9, "mode is a string (empty: enqueue)");
  assert.deepEqual(names(agents.SendMessagesRequestSchema).slice(0, 2), ["id", "messages"]);
  assert.equal(field(agents.SessionEventSchema, "queued_seq")?.number, 20);
  assert.equal(fields(agents.SessionEventSchema).queued_seq, "queuedSeq");
  assert.equal(field(agents.GetSessionResponseSchema, "queued_sends")?.number, 21);
  assert.equal(field(agents.GetSessionResponseSchema, "queued_sends")?.fieldKind, "list");
  assert.equal(fields(agents.GetSessionResponseSchema).queued_sends, "queuedSends");
  // The specification's SessionEvent fields keep their numbers 1-8.
  assert.deepEqual(
    agents.SessionEventSchema.fields.filter((f) => f.number < 20).map((f) => [f.name, f.number]),
    [
      ["seq", 1],
      ["type", 2],
      ["content", 3],
      ["tokens_in", 4],
      ["tokens_out", 5],
      ["tool_use_id", 6],
      ["is_error", 7],
      ["created_at", 8],
    ],
  );
});

test("agents schedules (issue 25): a service of its own, camelCase, optional update fields", () => {
  assert.deepEqual(
    schedules.ScheduleService.methods.map((m) => m.name),
    ["CreateSchedule", "ListSchedules", "GetSchedule", "UpdateSchedule", "DeleteSchedule", "ListScheduleFirings"],
  );
  assert.deepEqual(names(schedules.ScheduleSchema), [
    "id",
    "agent_id",
    "cron",
    "time_zone",
    "message",
    "target",
    "session_id",
    "catch_up",
    "enabled",
    "next_runs",
    "created_by",
    "created_at",
    "updated_at",
  ]);
  assert.equal(fields(schedules.ScheduleSchema).time_zone, "timeZone");
  assert.equal(fields(schedules.ScheduleSchema).next_runs, "nextRuns");
  assert.equal(fields(schedules.ScheduleSchema).catch_up, "catchUp");
  assert.equal(fields(schedules.ScheduleFiringSchema).slot_time, "slotTime");
  for (const f of schedules.UpdateScheduleRequestSchema.fields.slice(1))
    assert.ok(f.proto.proto3Optional, `UpdateScheduleRequest.${f.name}: absent leaves it as it is`);
  assert.deepEqual(names(schedules.ListSchedulesResponseSchema), ["items", "next"]);
  assert.deepEqual(names(schedules.ListScheduleFiringsResponseSchema), ["items", "next"]);
});

test("runtime messages and the health protocol", () => {
  assert.deepEqual(names(runtime.InvokeRequestSchema).slice(0, 3), ["session_id", "request_id", "trace_id"]);
  // The specification's three events as numbered; requires_action (issue 20) is an addition after them.
  assert.deepEqual(
    runtime.InvokeEventSchema.oneofs.map((o) => o.fields.map((f) => [f.name, f.number])),
    [
      [
        ["text_chunk", 1],
        ["turn_done", 2],
        ["error", 3],
        ["requires_action", 4],
      ],
    ],
  );
  assert.deepEqual(names(runtime.TextChunkEventSchema), ["content"]);
  assert.deepEqual(names(runtime.ErrorEventSchema), ["message"]);
  assert.deepEqual(
    health.Health.methods.map((m) => m.name),
    ["Check", "Watch"],
  );
  assert.equal(health.Health.typeName, "grpc.health.v1.Health");
});

test("sandbox images (issue 22): agents' image is field 25, a string as compute's CreateSandbox image", () => {
  for (const schema of [agents.AgentSchema, agents.CreateAgentRequestSchema, agents.UpdateAgentRequestSchema]) {
    const f = schema.fields.find((x) => x.name === "image");
    assert.equal(f?.number, 25, `${schema.typeName}.image`);
    assert.equal(f?.scalar, 9 /* string */);
  }
  assert.equal(agents.UpdateAgentRequestSchema.field.image?.proto.proto3Optional, true, "update: absent keeps it");
});

test("sandbox network (issue 21): agents' network_policy is field 24 with compute's shape", () => {
  const number = (schema: DescMessage, name: string) => schema.fields.find((f) => f.name === name)?.number;
  for (const schema of [agents.AgentSchema, agents.CreateAgentRequestSchema, agents.UpdateAgentRequestSchema])
    assert.equal(number(schema, "network_policy"), 24, `${schema.typeName}.network_policy`);
  for (const schema of [agents.AgentNetworkPolicySchema, agents.AgentNetworkPolicyInputSchema])
    assert.deepEqual(names(schema), names(compute.NetworkPolicySchema));
  for (const schema of [agents.AgentCidrRuleSchema, agents.AgentCidrRuleInputSchema])
    assert.deepEqual(names(schema), names(compute.CidrRuleSchema));
  assert.deepEqual(names(compute.NetworkEventSchema), [
    "sequence",
    "time",
    "host",
    "port",
    "address",
    "allowed",
    "reason",
    "protocol",
    "egress_bytes",
    "ingress_bytes",
    "duration",
  ]);
});
