import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import {
  type AuthContextSchema,
  AuthMode,
  type AuthService,
  Env,
  Role,
  type VerifyTokenResponse,
  VerifyTokenResponseSchema,
} from "@platform/gen/identity/v1/auth_pb";
import { OrgService, SessionService, UserService } from "@platform/gen/identity/v1/rest_pb";
import type { AuthContext, KeyEnv } from "../auth/auth-context.ts";
import { fixedMessage, requestInfo } from "@platform/rpc";
import type { Identity } from "../identity.ts";
import { actorOf, auditFailedLogin } from "../audit/audit-log.ts";
import { apiKeyMessage } from "./api-key-message.ts";
import { authContextKey } from "./auth-interceptor.ts";
import { replayable } from "./idempotency-interceptor.ts";
import { requestMeta } from "./teams-handlers.ts";

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
    scopes: [...(c.scopes ?? [])],
    orgKey: c.orgKey === true,
  };
}

const envOf = (e: Env): KeyEnv | undefined => (e === Env.LIVE ? "live" : e === Env.TEST ? "test" : undefined);
/** VerifyToken's reply for each frozen AuthContext (a cached session's: jwt-service.ts). */
const verifyTokenReplies = new WeakMap<AuthContext, VerifyTokenResponse>();

/**
 * VerifyToken's reply to `c`. A frozen AuthContext does not change, so its
 * reply is made once, as a fixed message (frozen, encoded once: rpc's
 * fixedMessage): a session re-verified thousands of times a second gets the
 * same bytes without making and encoding the message each call.
 */
function verifyTokenReply(c: AuthContext): VerifyTokenResponse {
  if (!Object.isFrozen(c)) return create(VerifyTokenResponseSchema, { context: toAuthContextMessage(c) });
  let reply = verifyTokenReplies.get(c);
  if (reply === undefined) {
    reply = fixedMessage(
      VerifyTokenResponseSchema,
      create(VerifyTokenResponseSchema, { context: toAuthContextMessage(c) }),
    );
    verifyTokenReplies.set(c, reply);
  }
  return reply;
}

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
    token: {
      accessToken: p.accessToken,
      tokenType: p.tokenType,
      expiresIn: BigInt(p.expiresIn),
      refreshToken: p.refreshToken,
    },
  });
  return {
    login: async (req, ctx) => {
      const meta = requestMeta(identity, ctx);
      const result = await identity.sessions
        .login({
          email: req.email,
          password: req.password,
          deviceLabel: req.xDeviceLabel,
          clientAddress: meta.clientAddress,
          requestId: meta.requestId,
          signal: ctx.signal,
        })
        .catch((err: unknown) => {
          if (err instanceof PlatformError && err.reason === IdentityRestCode.unauthenticated) {
            // After the answer, off its path: a failed login is recorded, never delayed by it.
            void auditFailedLogin(identity.db, meta, req.email).catch((e: unknown) =>
              requestInfo(ctx)?.logger.warn({ err: e }, "audit of a failed login not written"),
            );
          }
          throw err;
        });
      // Its audit entry was written with the session (Sessions.login).
      return pair(result);
    },
    refresh: async (req, ctx) => pair(await identity.sessions.refresh(req.refreshToken, requestMeta(identity, ctx))),
    logout: async (req) => {
      await identity.sessions.logout(req.refreshToken);
      return {};
    },
    revokeAll: async (req, ctx) => {
      await identity.sessions.revokeAll(caller(ctx), req.userId, actorOf(caller(ctx), requestMeta(identity, ctx)));
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
        apiKeys: keys.map(apiKeyMessage),
      };
    },
    createAPIKey: async (req, ctx) => {
      const k = await identity.apiKeys.create(
        caller(ctx),
        {
          name: req.name,
          env: req.env,
          expiresAt: req.expiresAt ? timestampDate(req.expiresAt) : undefined,
          scopes: req.scopes,
          org: req.org,
        },
        actorOf(caller(ctx), requestMeta(identity, ctx)),
      );
      return {
        id: k.id,
        keyPrefix: k.keyPrefix,
        rawKey: k.rawKey,
        env: k.env,
        expiresAt: ts(k.expiresAt),
        scopes: k.scopes,
        org: k.org,
      };
    },
    revokeAPIKey: async (req, ctx) => {
      await identity.apiKeys.revoke(caller(ctx), req.id, actorOf(caller(ctx), requestMeta(identity, ctx)));
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
    updateOrg: async (req, ctx) =>
      org(
        await identity.orgs.update(
          caller(ctx),
          req.id,
          { name: req.name, slug: req.slug },
          actorOf(caller(ctx), requestMeta(identity, ctx)),
        ),
      ),
  };
}

export function authService(identity: Identity): Partial<ServiceImpl<typeof AuthService>> {
  return {
    verifyAPIKey: async (req) => ({
      context: toAuthContextMessage(await identity.authenticator.verifyApiKey(req.apiKey, envOf(req.requiredEnv))),
    }),
    verifyJWT: async (req) => ({ context: toAuthContextMessage(await identity.authenticator.verifyJwt(req.token)) }),
    verifyToken: async (req) => verifyTokenReply(await identity.authenticator.verifyToken(req.token)),
    issueJWT: async (req) => {
      const seconds = req.ttl ? Number(req.ttl.seconds) + req.ttl.nanos / 1e9 : 0;
      const issued = await identity.jwt.issueForMember(req.userId, req.orgId, seconds);
      return {
        accessToken: issued.token,
        expiresAt: timestampFromDate(issued.expiresAt),
        expiresIn: BigInt(issued.expiresIn),
        kid: issued.kid,
        jti: issued.jti,
      };
    },
    getPublicKey: async (req) => ({ kid: req.kid, der: await identity.keys.publicKeyDer(req.kid), algorithm: "RS256" }),
  };
}
