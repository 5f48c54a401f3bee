import type { DescMethod } from "@bufbuild/protobuf";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";

/**
 * Who may call an RPC:
 * - none: no credential (login, refresh, logout; the internal AuthService,
 *   which only the agents pods can reach, on the gRPC listener only)
 * - jwt-or-key: a JWT or an API key
 * - jwt-only: a JWT (an API key cannot create or revoke API keys)
 * - owner: a JWT whose current membership role is owner
 */
export type Policy = "none" | "jwt-or-key" | "jwt-only" | "owner";

export type RpcRule = { policy: Policy; idempotent: boolean };

const rules: Record<string, RpcRule> = {
  [`${SessionService.typeName}/Login`]: { policy: "none", idempotent: false },
  [`${SessionService.typeName}/Refresh`]: { policy: "none", idempotent: false },
  [`${SessionService.typeName}/Logout`]: { policy: "none", idempotent: false },
  [`${SessionService.typeName}/RevokeAll`]: { policy: "owner", idempotent: true },
  [`${UserService.typeName}/GetMe`]: { policy: "jwt-or-key", idempotent: false },
  [`${UserService.typeName}/ListAPIKeys`]: { policy: "jwt-or-key", idempotent: false },
  [`${UserService.typeName}/CreateAPIKey`]: { policy: "jwt-only", idempotent: true },
  [`${UserService.typeName}/RevokeAPIKey`]: { policy: "jwt-only", idempotent: true },
  [`${OrgService.typeName}/GetOrg`]: { policy: "jwt-or-key", idempotent: false },
  [`${OrgService.typeName}/UpdateOrg`]: { policy: "owner", idempotent: true },
  [`${AuthService.typeName}/VerifyAPIKey`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/VerifyJWT`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/IssueJWT`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/GetPublicKey`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/VerifyToken`]: { policy: "none", idempotent: false },
};

// The rpc package's infrastructure services on the same router: public by nature.
const infrastructure = new Set(["grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"]);
const open_: RpcRule = { policy: "none", idempotent: false };

// Both interceptors ask on every call; descriptors live as long as the process.
const resolved = new WeakMap<DescMethod, RpcRule | null>();

/** The rule of a method. An RPC without one is refused, so a new RPC is never public by accident. */
export function ruleOf(method: DescMethod): RpcRule | undefined {
  let rule = resolved.get(method);
  if (rule === undefined) {
    rule = infrastructure.has(method.parent.typeName) ? open_ : (rules[`${method.parent.typeName}/${method.name}`] ?? null);
    resolved.set(method, rule);
  }
  return rule ?? undefined;
}

export const allRules = (): Readonly<Record<string, RpcRule>> => rules;
