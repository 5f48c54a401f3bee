import type { DescMethod } from "@bufbuild/protobuf";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { KeyPublicationService } from "@platform/gen/identity/v1/keys_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import {
  AccountService,
  AuditService,
  MemberService,
  OrgAPIKeyService,
  TeamService,
} from "@platform/gen/identity/v1/teams_pb";
import { WebhookEventService, WebhookService } from "@platform/gen/identity/v1/webhooks_pb";

/**
 * Who may call an RPC:
 * - none: no credential (login, refresh, logout; the internal AuthService,
 *   which only the agents pods can reach, on the gRPC listener only)
 * - jwt-or-key: a JWT or an API key
 * - jwt-only: a JWT (an API key cannot create or revoke API keys)
 * - owner: a JWT whose current membership role is owner
 * - admin: what owner allows, or an API key with the admin scope (an
 *   organization's key, or a personal key of a current owner): managing the
 *   org's people and reading its audit log. The specification's owner routes
 *   (revoke-all, PATCH org) and key management stay owner (a person).
 */
export type Policy = "none" | "jwt-or-key" | "jwt-only" | "owner" | "admin";

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
  // Teams (issue 19). AcceptInvitation and SignUp have no caller to scope an
  // Idempotency-Key to: like login, their single-use input is their guard.
  [`${MemberService.typeName}/CreateInvitation`]: { policy: "admin", idempotent: true },
  [`${MemberService.typeName}/ListInvitations`]: { policy: "admin", idempotent: false },
  [`${MemberService.typeName}/RevokeInvitation`]: { policy: "admin", idempotent: true },
  [`${MemberService.typeName}/AcceptInvitation`]: { policy: "none", idempotent: false },
  [`${MemberService.typeName}/ListMembers`]: { policy: "admin", idempotent: false },
  [`${MemberService.typeName}/UpdateMember`]: { policy: "admin", idempotent: true },
  [`${MemberService.typeName}/RemoveMember`]: { policy: "admin", idempotent: true },
  [`${OrgAPIKeyService.typeName}/ListOrgAPIKeys`]: { policy: "owner", idempotent: false },
  [`${OrgAPIKeyService.typeName}/RevokeOrgAPIKey`]: { policy: "owner", idempotent: true },
  [`${TeamService.typeName}/CreateOrg`]: { policy: "jwt-only", idempotent: true },
  [`${TeamService.typeName}/ListMyOrgs`]: { policy: "jwt-or-key", idempotent: false },
  [`${TeamService.typeName}/SwitchOrg`]: { policy: "jwt-only", idempotent: true },
  [`${TeamService.typeName}/SignUp`]: { policy: "none", idempotent: false },
  [`${AccountService.typeName}/UpdateMe`]: { policy: "jwt-only", idempotent: true },
  [`${AccountService.typeName}/ChangePassword`]: { policy: "jwt-only", idempotent: true },
  [`${AuditService.typeName}/ListAuditEvents`]: { policy: "admin", idempotent: false },
  // Webhooks (issue 25): the organization's, managed like its people.
  [`${WebhookService.typeName}/CreateWebhook`]: { policy: "admin", idempotent: true },
  [`${WebhookService.typeName}/ListWebhooks`]: { policy: "admin", idempotent: false },
  [`${WebhookService.typeName}/GetWebhook`]: { policy: "admin", idempotent: false },
  [`${WebhookService.typeName}/UpdateWebhook`]: { policy: "admin", idempotent: true },
  [`${WebhookService.typeName}/DeleteWebhook`]: { policy: "admin", idempotent: true },
  [`${WebhookService.typeName}/RotateWebhookSecret`]: { policy: "admin", idempotent: true },
  [`${WebhookService.typeName}/ListWebhookDeliveries`]: { policy: "admin", idempotent: false },
  [`${WebhookService.typeName}/RedeliverWebhookDelivery`]: { policy: "admin", idempotent: true },
  // Internal port only, the agents certificate (IDENTITY_CALLERS): a service's events carry no user credential.
  [`${WebhookEventService.typeName}/PublishWebhookEvents`]: { policy: "none", idempotent: false },
  // Public keys for outside verifiers: no secret, no credential.
  [`${KeyPublicationService.typeName}/GetJwks`]: { policy: "none", idempotent: false },
  [`${KeyPublicationService.typeName}/GetOpenIdConfiguration`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/VerifyAPIKey`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/VerifyJWT`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/IssueJWT`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/GetPublicKey`]: { policy: "none", idempotent: false },
  [`${AuthService.typeName}/VerifyToken`]: { policy: "none", idempotent: false },
};

// The rpc package's infrastructure services on the same router: public by nature.
const infrastructure = new Set([
  "grpc.health.v1.Health",
  "grpc.reflection.v1.ServerReflection",
  "grpc.reflection.v1alpha.ServerReflection",
]);
const open_: RpcRule = { policy: "none", idempotent: false };

// Both interceptors ask on every call; descriptors live as long as the process.
const resolved = new WeakMap<DescMethod, RpcRule | null>();

/** The rule of a method. An RPC without one is refused, so a new RPC is never public by accident. */
export function ruleOf(method: DescMethod): RpcRule | undefined {
  let rule = resolved.get(method);
  if (rule === undefined) {
    rule = infrastructure.has(method.parent.typeName)
      ? open_
      : (rules[`${method.parent.typeName}/${method.name}`] ?? null);
    resolved.set(method, rule);
  }
  return rule ?? undefined;
}

export const allRules = (): Readonly<Record<string, RpcRule>> => rules;
