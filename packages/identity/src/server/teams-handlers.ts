import type { JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import {
  AccountService,
  type AuditService,
  MemberService,
  OrgAPIKeyService,
  TeamService,
} from "@platform/gen/identity/v1/teams_pb";
import { requestInfo } from "@platform/rpc";
import type { AuthContext } from "../auth/auth-context.ts";
import { type Actor, actorOf, type RequestMeta } from "../audit/audit-log.ts";
import type { Identity } from "../identity.ts";
import type { Invitation } from "../members/invitations.ts";
import type { Member } from "../members/members.ts";
import { clientAddress } from "../login-throttle/client-address.ts";
import type { Org } from "../orgs/orgs.ts";
import type { TokenPair } from "../sessions/sessions.ts";
import { apiKeyMessage } from "./api-key-message.ts";
import { authContextKey } from "./auth-interceptor.ts";
import { replayable } from "./idempotency-interceptor.ts";

// Translation only: the rules live in members/, orgs/my-orgs.ts and users/account.ts.

const ts = (d: Date) => timestampFromDate(d);

function caller(ctx: HandlerContext): AuthContext {
  const c = ctx.values.get(authContextKey);
  if (!c) throw PlatformError.unauthenticated("missing credential", IdentityRestCode.unauthenticated);
  return c;
}

/** The request's id and the client's address (behind the trusted proxies the login throttle is configured with), for the audit log. */
export function requestMeta(identity: Identity, ctx: HandlerContext): RequestMeta {
  const info = requestInfo(ctx);
  return {
    requestId: info?.requestId,
    clientAddress: clientAddress(
      info?.remoteAddress,
      ctx.requestHeader.get("x-forwarded-for"),
      identity.loginThrottle.settings.trustedProxyHops,
      identity.loginThrottle.trustedProxies,
    ),
  };
}

const actor = (identity: Identity, ctx: HandlerContext): Actor => actorOf(caller(ctx), requestMeta(identity, ctx));

const pair = (p: TokenPair) => ({
  token: {
    accessToken: p.accessToken,
    tokenType: p.tokenType,
    expiresIn: BigInt(p.expiresIn),
    refreshToken: p.refreshToken,
  },
});
const invitation = (i: Invitation) => ({
  id: i.id,
  orgId: i.orgId,
  email: i.email,
  role: i.role,
  expiresAt: ts(i.expiresAt),
  createdAt: ts(i.createdAt),
});
const member = (m: Member) => ({
  userId: m.userId,
  email: m.email,
  name: m.name,
  role: m.role,
  createdAt: ts(m.createdAt),
});
const org = (o: Org) => ({
  id: o.id,
  name: o.name,
  slug: o.slug,
  createdAt: ts(o.createdAt),
  updatedAt: ts(o.updatedAt),
});

export function memberService(identity: Identity): Partial<ServiceImpl<typeof MemberService>> {
  return replayable(MemberService, {
    createInvitation: async (req, ctx) => {
      const created = await identity.invitations.create(caller(ctx), actor(identity, ctx), req.orgId, {
        email: req.email,
        role: req.role,
      });
      return { invitation: invitation(created.invitation), token: created.token };
    },
    listInvitations: async (req, ctx) => ({
      invitations: (await identity.invitations.list(caller(ctx), req.orgId)).map(invitation),
    }),
    revokeInvitation: async (req, ctx) => {
      await identity.invitations.revoke(caller(ctx), actor(identity, ctx), req.orgId, req.id);
      return {};
    },
    acceptInvitation: async (req, ctx) =>
      pair(
        await identity.invitations.accept(
          { token: req.token, password: req.password, name: req.name, email: req.email },
          requestMeta(identity, ctx),
        ),
      ),
    listMembers: async (req, ctx) => ({ members: (await identity.members.list(caller(ctx), req.orgId)).map(member) }),
    updateMember: async (req, ctx) => ({
      member: member(
        await identity.members.setRole(caller(ctx), actor(identity, ctx), req.orgId, req.userId, req.role),
      ),
    }),
    removeMember: async (req, ctx) => {
      await identity.members.remove(caller(ctx), actor(identity, ctx), req.orgId, req.userId);
      return {};
    },
  });
}

export function orgApiKeyService(identity: Identity): Partial<ServiceImpl<typeof OrgAPIKeyService>> {
  return replayable(OrgAPIKeyService, {
    listOrgAPIKeys: async (req, ctx) => ({
      apiKeys: (await identity.apiKeys.listOrg(caller(ctx), req.orgId)).map(apiKeyMessage),
    }),
    revokeOrgAPIKey: async (req, ctx) => {
      await identity.apiKeys.revokeOrg(caller(ctx), req.orgId, req.id, actor(identity, ctx));
      return {};
    },
  });
}

export function teamService(identity: Identity): Partial<ServiceImpl<typeof TeamService>> {
  return replayable(TeamService, {
    createOrg: async (req, ctx) => ({
      org: org(await identity.myOrgs.create(caller(ctx), actor(identity, ctx), { name: req.name, slug: req.slug })),
    }),
    listMyOrgs: async (_req, ctx) => ({
      orgs: (await identity.myOrgs.list(caller(ctx))).map((m) => ({
        org: org(m.org),
        role: m.role,
        joinedAt: ts(m.joinedAt),
      })),
    }),
    switchOrg: async (req, ctx) =>
      pair(await identity.myOrgs.switchTo(caller(ctx), actor(identity, ctx), req.orgId, req.xDeviceLabel)),
    signUp: async (req, ctx) =>
      pair(
        await identity.myOrgs.signUp(
          { email: req.email, password: req.password, name: req.name, orgName: req.orgName },
          requestMeta(identity, ctx),
        ),
      ),
  });
}

export function accountService(identity: Identity): Partial<ServiceImpl<typeof AccountService>> {
  return replayable(AccountService, {
    updateMe: async (req, ctx) => {
      const u = await identity.account.update(caller(ctx), actor(identity, ctx), { name: req.name });
      return { user: { id: u.id, email: u.email, name: u.name, createdAt: ts(u.createdAt) } };
    },
    changePassword: async (req, ctx) =>
      pair(
        await identity.account.changePassword(caller(ctx), actor(identity, ctx), {
          currentPassword: req.currentPassword,
          newPassword: req.newPassword,
        }),
      ),
  });
}

export function auditService(identity: Identity): Partial<ServiceImpl<typeof AuditService>> {
  return {
    listAuditEvents: async (req, ctx) => {
      const page = await identity.audit.list(caller(ctx), req.orgId, {
        limit: req.limit,
        after: req.after,
        action: req.action,
        actorUserId: req.actorUserId,
      });
      return {
        items: page.items.map((e) => ({
          id: e.id,
          orgId: e.orgId ?? "",
          actorUserId: e.actorUserId ?? "",
          actorApiKeyId: e.actorApiKeyId ?? "",
          action: e.action,
          targetType: e.targetType ?? "",
          targetId: e.targetId ?? "",
          requestId: e.requestId ?? "",
          clientAddress: e.clientAddress ?? "",
          details: e.details as JsonObject,
          createdAt: ts(e.createdAt),
        })),
        next: page.next ?? undefined,
      };
    },
  };
}
