import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type AuthContextSchema, AuthMode, type AuthService, Env, Role } from "@platform/gen/identity/v1/auth_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import type { AuthContext, KeyEnv } from "../auth/auth-context.ts";
import { requestInfo } from "@platform/rpc";
import type { Identity } from "../identity.ts";
import { clientAddress } from "../login-throttle/client-address.ts";
import { authContextKey } from "./auth-interceptor.ts";
import { replayable } from "./idempotency-interceptor.ts";

// Handlers translate between messages and the domain; the rules live in the domain.

function caller(ctx: HandlerContext): AuthContext {
  const c = ctx.values.get(authContextKey);
  if (!c) throw PlatformError.unauthenticated("missing credential", IdentityRestCode.unauthenticated);
  return c;
}

export function toAuthContextMessage(c: AuthContext): MessageInitShape<typeof AuthContextSchema> {
  return {
    userId: c.userId,
    orgId: c.orgId,
    mode: c.mode === "jwt" ? AuthMode.JWT : AuthMode.API_KEY,
    role: c.role === "owner" ? Role.OWNER : Role.MEMBER,
    env: c.env === "live" ? Env.LIVE : Env.TEST,
    authKeyId: c.authKeyId ?? "",
    apiKeyId: c.apiKeyId ?? "",
    method: c.method,
  };
}

const envOf = (e: Env): KeyEnv | undefined => (e === Env.LIVE ? "live" : e === Env.TEST ? "test" : undefined);
const ts = (d: Date | null | undefined) => (d ? timestampFromDate(d) : undefined);

export function sessionService(identity: Identity): Partial<ServiceImpl<typeof SessionService>> {
  return replayable(SessionService, sessionImpl(identity));
}
export function userService(identity: Identity): Partial<ServiceImpl<typeof UserService>> {
  return replayable(UserService, userImpl(identity));
}
export function orgService(identity: Identity): Partial<ServiceImpl<typeof OrgService>> {
  return replayable(OrgService, orgImpl(identity));
}

function sessionImpl(identity: Identity): Partial<ServiceImpl<typeof SessionService>> {
  const pair = (p: Awaited<ReturnType<Identity["sessions"]["login"]>>) => ({
    token: { accessToken: p.accessToken, tokenType: p.tokenType, expiresIn: BigInt(p.expiresIn), refreshToken: p.refreshToken },
  });
  return {
    login: async (req, ctx) => {
      const address = clientAddress(requestInfo(ctx)?.remoteAddress, ctx.requestHeader.get("x-forwarded-for"), identity.loginThrottle.settings.trustedProxyHops);
      return pair(await identity.sessions.login({ email: req.email, password: req.password, deviceLabel: req.xDeviceLabel, clientAddress: address }));
    },
    refresh: async (req) => pair(await identity.sessions.refresh(req.refreshToken)),
    logout: async (req) => {
      await identity.sessions.logout(req.refreshToken);
      return {};
    },
    revokeAll: async (req, ctx) => {
      await identity.sessions.revokeAll(caller(ctx), req.userId);
      return {};
    },
  };
}

function userImpl(identity: Identity): Partial<ServiceImpl<typeof UserService>> {
  return {
    getMe: async (_req, ctx) => {
      const u = await identity.users.get(caller(ctx).userId);
      return { user: { id: u.id, email: u.email, name: u.name, createdAt: ts(u.createdAt) } };
    },
    listAPIKeys: async (_req, ctx) => {
      const keys = await identity.apiKeys.list(caller(ctx));
      return {
        apiKeys: keys.map((k) => ({ id: k.id, name: k.name, keyPrefix: k.keyPrefix, env: k.env, expiresAt: ts(k.expiresAt), lastUsedAt: ts(k.lastUsedAt) })),
      };
    },
    createAPIKey: async (req, ctx) => {
      const k = await identity.apiKeys.create(caller(ctx), { name: req.name, env: req.env, expiresAt: req.expiresAt ? timestampDate(req.expiresAt) : undefined });
      return { id: k.id, keyPrefix: k.keyPrefix, rawKey: k.rawKey, env: k.env, expiresAt: ts(k.expiresAt) };
    },
    revokeAPIKey: async (req, ctx) => {
      await identity.apiKeys.revoke(caller(ctx), req.id);
      return {};
    },
  };
}

function orgImpl(identity: Identity): Partial<ServiceImpl<typeof OrgService>> {
  const org = (o: Awaited<ReturnType<Identity["orgs"]["getForCaller"]>>) => ({
    org: { id: o.id, name: o.name, slug: o.slug, createdAt: ts(o.createdAt), updatedAt: ts(o.updatedAt) },
  });
  return {
    getOrg: async (req, ctx) => org(await identity.orgs.getForCaller(caller(ctx), req.id)),
    updateOrg: async (req, ctx) => org(await identity.orgs.update(caller(ctx), req.id, { name: req.name, slug: req.slug })),
  };
}

export function authService(identity: Identity): Partial<ServiceImpl<typeof AuthService>> {
  return {
    verifyAPIKey: async (req) => ({ context: toAuthContextMessage(await identity.authenticator.verifyApiKey(req.apiKey, envOf(req.requiredEnv))) }),
    verifyJWT: async (req) => ({ context: toAuthContextMessage(await identity.authenticator.verifyJwt(req.token)) }),
    verifyToken: async (req) => ({ context: toAuthContextMessage(await identity.authenticator.verifyToken(req.token)) }),
    issueJWT: async (req) => {
      const seconds = req.ttl ? Number(req.ttl.seconds) + req.ttl.nanos / 1e9 : 0;
      const issued = await identity.jwt.issueForMember(req.userId, req.orgId, seconds);
      return { accessToken: issued.token, expiresAt: timestampFromDate(issued.expiresAt), expiresIn: BigInt(issued.expiresIn), kid: issued.kid, jti: issued.jti };
    },
    getPublicKey: async (req) => ({ kid: req.kid, der: await identity.keys.publicKeyDer(req.kid), algorithm: "RS256" }),
  };
}
