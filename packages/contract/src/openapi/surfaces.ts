import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { AgentService, SessionService as AgentsSessionService } from "@platform/gen/agents/v1/agents_pb";
import { ScheduleService } from "@platform/gen/agents/v1/schedules_pb";
import { UsageService } from "@platform/gen/agents/v1/usage_pb";
import { KeyPublicationService } from "@platform/gen/identity/v1/keys_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import {
  AccountService,
  AuditService,
  MemberService,
  OrgAPIKeyService,
  TeamService,
} from "@platform/gen/identity/v1/teams_pb";
import { WebhookService } from "@platform/gen/identity/v1/webhooks_pb";
import { RuntimeService } from "@platform/gen/runtime/v1/runtime_pb";
import { httpBindingsOf } from "@platform/rpc";
import type { Access, Surface } from "./document.ts";

/** identity's policy of an RPC (packages/identity/src/server/policies.ts: ruleOf). */
export type IdentityRule = (method: DescMethod) => { policy: string; idempotent: boolean } | undefined;
/** The API key scope an agents RPC needs (packages/agents/src/server/scopes.ts: scopeOf). */
export type AgentsScope = (service: string, method: string) => string;

const policyText: Record<string, string> = {
  "jwt-or-key": "a JWT or an API key",
  "jwt-only": "a JWT (an API key is refused)",
  owner: "a JWT whose current role is owner",
  admin: "an owner's JWT, or an API key with the admin scope",
};

// identity's REST port (servers.ts: restServices).
const identityServices: readonly DescService[] = [
  SessionService,
  UserService,
  OrgService,
  MemberService,
  OrgAPIKeyService,
  TeamService,
  AccountService,
  AuditService,
  KeyPublicationService,
  WebhookService,
];

/** What identity's OpenAPI document covers: its REST services, snake_case JSON and reason envelope. */
export function identitySurface(ruleOf: IdentityRule): Surface {
  return {
    name: "identity",
    title: "Identity REST API",
    description:
      "Users, organizations, members, API keys and tokens (port 8081). Field names are the snake_case the " +
      "specification shows; timestamps are RFC 3339; 64-bit integers are JSON numbers (strings beyond 2^53). " +
      "Errors are `{code, message}` with the reason as `code`.",
    defaultPort: 8081,
    services: identityServices,
    style: { emitNulls: true },
    envelope: "reason",
    strictBody: true,
    access(method) {
      const rule = ruleOf(method);
      if (!rule) throw new Error(`identity has no policy for ${method.parent.typeName}/${method.name}`);
      if (rule.policy === "none") return { public: true, idempotencyKey: rule.idempotent };
      return { public: false, requirement: policyText[rule.policy] ?? rule.policy, idempotencyKey: rule.idempotent };
    },
    // Public routes hash passwords: throttled logins (429) and a full hashing queue (503).
    errors: (method, access) => restErrors(method, access.public ? [429, 503] : []),
  };
}

/** What the agents OpenAPI document covers: its REST services, lowerCamelCase JSON, SSE routes and envelope. */
export function agentsSurface(scopeOf: AgentsScope): Surface {
  return {
    name: "agents",
    title: "Agents REST API",
    description:
      "Agents, sessions, their event logs, model replies as Server-Sent Events and a session's workspace " +
      "files (port 8082). Field names are lowerCamelCase; every field is written (zero values and null " +
      "included) except in SSE events, which omit zero and empty fields. Errors are " +
      "`{error: {code, message}}` with the Connect code name as `code`.",
    defaultPort: 8082,
    services: [AgentService, AgentsSessionService, UsageService, ScheduleService],
    style: { alwaysEmitImplicit: true, emitNulls: true },
    envelope: "code-name",
    strictBody: false,
    access(method): Access {
      const scope = scopeOf(method.parent.typeName, method.name);
      // agents' NO_KEY_SCOPE: a scope no key has.
      if (scope === "none") return { public: false, requirement: "a JWT (no API key may)" };
      return { public: false, requirement: `a JWT, or an API key with the \`${scope}\` scope` };
    },
    // 503: identity or compute unreachable, a model provider down. 429: a send to a
    // session past one of its budgets (resource_exhausted, issue 20).
    errors: (method) => restErrors(method, method.name === "SendMessages" ? [429, 503] : [503]),
  };
}

/** What the runtime router's OpenAPI document covers: its invoke route and SSE events. */
export function routerSurface(): Surface {
  return {
    name: "router",
    title: "Runtime router",
    description:
      "The public invoke endpoint (port 8080): authenticates, wakes the tenant's worker and streams the " +
      "reply as Server-Sent Events. Errors before the stream starts are `{error: {code, message}}`; after, " +
      "the `error` event.",
    defaultPort: 8080,
    services: [RuntimeService],
    style: {},
    envelope: "code-name",
    strictBody: false,
    access: () => ({ public: false, requirement: "a JWT (verified with identity's VerifyJWT)" }),
    // 503 + Retry-After: the tenant's worker did not come up in time.
    errors: (method) => restErrors(method, [503]),
  };
}

/**
 * The error statuses of an operation beside `default`: what its port answers
 * any route (400, 404, 413; 415 for a body that is not JSON), what a
 * credential check answers (401, 403: identity's public routes too, for a
 * wrong password or a closed sign-up) and 409 for a change that conflicts.
 */
function restErrors(method: DescMethod, extra: number[] = []): number[] {
  const out = new Set([400, 401, 403, 404, 413, ...extra]);
  const bindings = httpBindingsOf(method);
  if (bindings.some((b) => b.body !== "")) out.add(415);
  if (bindings.some((b) => b.verb !== "GET")) out.add(409);
  return [...out].sort((a, b) => a - b);
}
