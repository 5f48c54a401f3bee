import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { ErrorAction, IdentityRestCode, PlatformError } from "@platform/errors";
import { type RunPrepared, statementRunner } from "@platform/db";
import { sha256 } from "../crypto/hash.ts";
import { type Fixture, createFixture } from "../testing/fixture.ts";
import { Users } from "../users/users.ts";
import { RefreshTokens } from "./refresh-tokens.ts";
import { Sessions } from "./sessions.ts";

let f: Fixture;
before(async () => {
  f = await createFixture();
});
after(() => f.close());

async function rejects(p: Promise<unknown>, reason: string, extra?: Record<string, string>) {
  const err = await p.then(
    () => assert.fail(`expected ${reason}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof PlatformError, String(err));
  assert.equal(err.reason, reason, err.message);
  if (extra) assert.deepEqual(err.extra, extra);
  return err;
}

describe("login", () => {
  test("returns a token pair; email is case-insensitive; device label stored", async () => {
    const u = await f.seedUser({ email: "Mixed.Case@Example.com" });
    const pair = await f.identity.sessions.login({
      email: "mixed.case@EXAMPLE.COM",
      password: u.password,
      deviceLabel: "laptop",
    });
    assert.equal(pair.tokenType, "Bearer");
    assert.equal(pair.expiresIn, 3600);
    assert.match(pair.refreshToken, /^rt_[0-9A-Za-z]{43}$/);
    const ctx = await f.identity.jwt.verify(pair.accessToken);
    assert.equal(ctx.userId, u.user.id);
    assert.equal(ctx.orgId, u.orgId);
    const fam = await f.identity.db
      .selectFrom("refresh_token_families")
      .select("device_label")
      .where("user_id", "=", u.user.id)
      .executeTakeFirstOrThrow();
    assert.equal(fam.device_label, "laptop");
  });

  test("the session's family, first token and audit entry are written by one statement, each column in place", async () => {
    const u = await f.seedUser();
    const pair = await f.identity.sessions.login({
      email: u.user.email,
      password: u.password,
      deviceLabel: "tablet",
      requestId: "req-login-columns",
      clientAddress: "192.0.2.7",
    });
    const token = await f.identity.db
      .selectFrom("refresh_tokens as t")
      .innerJoin("refresh_token_families as fam", "fam.id", "t.family_id")
      .select(["fam.user_id", "fam.org_id", "fam.device_label", "t.created_at", "t.expires_at", "t.consumed_at"])
      .where("t.token_hash", "=", sha256(pair.refreshToken))
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      { user: token.user_id, org: token.org_id, device: token.device_label, consumed: token.consumed_at },
      { user: u.user.id, org: u.orgId, device: "tablet", consumed: null },
    );
    assert.equal(new Date(token.expires_at).getTime() - new Date(token.created_at).getTime(), 30 * 86_400_000);
    const entry = await f.identity.db
      .selectFrom("audit_events")
      .select([
        "org_id",
        "actor_user_id",
        "actor_api_key_id",
        "action",
        "target_type",
        "target_id",
        "request_id",
        "client_address",
        "details",
      ])
      .where("request_id", "=", "req-login-columns")
      .executeTakeFirstOrThrow();
    assert.deepEqual(entry, {
      org_id: u.orgId,
      actor_user_id: u.user.id,
      actor_api_key_id: null,
      action: "auth.login",
      target_type: "user",
      target_id: u.user.id,
      request_id: "req-login-columns",
      client_address: "192.0.2.7",
      details: {},
    });
  });

  test("a member of several orgs lands in the oldest membership, the owner one on a tie", async () => {
    const u = await f.seedUser({ role: "member" });
    const later = (await f.identity.orgs.create({ name: `Later ${randomUUID()}` })).id;
    const tied = [
      (await f.identity.orgs.create({ name: `Tie ${randomUUID()}` })).id,
      (await f.identity.orgs.create({ name: `Tie ${randomUUID()}` })).id,
    ];
    const at = (ms: number) => new Date(Date.UTC(2020, 0, 1) + ms);
    await f.identity.db
      .updateTable("memberships")
      .set({ created_at: at(1000) })
      .where("user_id", "=", u.user.id)
      .execute();
    await f.identity.db
      .insertInto("memberships")
      .values({ user_id: u.user.id, org_id: later, role: "owner", created_at: at(2000) })
      .execute();
    const orgOf = async () =>
      (
        await f.identity.jwt.verify(
          (
            await f.identity.sessions.login({ email: u.email, password: u.password })
          ).accessToken,
        )
      ).orgId;
    assert.equal(await orgOf(), u.orgId);
    await f.identity.db
      .insertInto("memberships")
      .values([
        { user_id: u.user.id, org_id: tied[0]!, role: "member", created_at: at(0) },
        { user_id: u.user.id, org_id: tied[1]!, role: "owner", created_at: at(0) },
      ])
      .execute();
    assert.equal(await orgOf(), tied[1]);
  });

  test("the refresh token is stored only as its SHA-256", async () => {
    const u = await f.seedUser();
    const pair = await f.identity.sessions.login({ email: u.email, password: u.password });
    const rows = await f.identity.db.selectFrom("refresh_tokens").select("token_hash").execute();
    assert.ok(rows.some((r) => Buffer.from(r.token_hash).equals(sha256(pair.refreshToken))));
    for (const r of rows) assert.ok(!Buffer.from(r.token_hash).toString("latin1").includes("rt_"));
  });

  test("wrong password, unknown email and no membership give the same 401 body", async () => {
    const u = await f.seedUser();
    const bodies = [];
    for (const input of [
      { email: u.email, password: "wrong password" },
      { email: "nobody@example.com", password: u.password },
    ]) {
      const e = await rejects(f.identity.sessions.login(input), IdentityRestCode.unauthenticated);
      bodies.push([e.code, e.reason, e.message]);
    }
    const loner = await f.identity.users.create({ email: "loner@example.com", name: "L", password: "pw-loner-123" });
    assert.ok(loner.id);
    const e = await rejects(
      f.identity.sessions.login({ email: "loner@example.com", password: "pw-loner-123" }),
      IdentityRestCode.unauthenticated,
    );
    bodies.push([e.code, e.reason, e.message]);
    assert.deepEqual(bodies[0], bodies[1]);
    assert.deepEqual(bodies[0], bodies[2]);
  });

  test("one statement after the hash: the family, its first token and the auth.login audit entry", async () => {
    const u = await f.seedUser();
    // The domain's own wiring, on a view of the database that counts what is sent.
    let statements = 0;
    const counted = f.identity.db.withPlugin({
      transformQuery: (args) => args.node,
      transformResult: async (args) => {
        statements++;
        return args.result;
      },
    });
    const run = statementRunner({ db: f.identity.db });
    const countedRun: RunPrepared = (text, values) => {
      statements++;
      return run(text, values);
    };
    const sessions = new Sessions({
      db: counted,
      users: new Users(counted, f.identity.hasher, countedRun),
      hasher: f.identity.hasher,
      jwt: f.identity.jwt,
      refreshTokens: new RefreshTokens(counted, 3600, countedRun),
      throttle: f.identity.loginThrottle,
      jwtTtlSeconds: 3600,
    });
    const pair = await sessions.login({
      email: u.email,
      password: u.password,
      clientAddress: "198.51.100.7",
      requestId: "req-login-1",
    });
    assert.equal(statements, 2, "the user with its membership, then one insert");
    const entry = await f.identity.db
      .selectFrom("audit_events")
      .selectAll()
      .where("request_id", "=", "req-login-1")
      .executeTakeFirstOrThrow();
    assert.equal(entry.action, "auth.login");
    assert.equal(entry.actor_user_id, u.user.id);
    assert.equal(entry.org_id, u.orgId);
    assert.equal(entry.target_type, "user");
    assert.equal(entry.target_id, u.user.id);
    assert.equal(entry.client_address, "198.51.100.7");
    assert.ok(!JSON.stringify(entry).includes(pair.refreshToken), "no token in the audit log");
    const family = await f.identity.db
      .selectFrom("refresh_tokens as t")
      .innerJoin("refresh_token_families as fam", "fam.id", "t.family_id")
      .select(["fam.user_id", "fam.org_id"])
      .where("t.token_hash", "=", sha256(pair.refreshToken))
      .executeTakeFirstOrThrow();
    assert.deepEqual(family, { user_id: u.user.id, org_id: u.orgId });
  });

  test("missing email or password is invalid_request", async () => {
    await rejects(f.identity.sessions.login({ email: "", password: "x" }), IdentityRestCode.invalidRequest);
    await rejects(f.identity.sessions.login({ email: "a@b.c", password: "" }), IdentityRestCode.invalidRequest);
  });
});

describe("refresh-token family", () => {
  test("active → consumed: a new pair in the same family; the old token is then reuse", async () => {
    const u = await f.seedUser();
    const first = await f.identity.sessions.login({ email: u.email, password: u.password });
    const second = await f.identity.sessions.refresh(first.refreshToken);
    assert.notEqual(second.refreshToken, first.refreshToken);
    assert.equal((await f.identity.jwt.verify(second.accessToken)).userId, u.user.id);
    await rejects(f.identity.sessions.refresh(first.refreshToken), IdentityRestCode.refreshTokenReused, {
      action: ErrorAction.reAuthenticate,
    });
    // Reuse revoked the whole family, the newest token included.
    await rejects(f.identity.sessions.refresh(second.refreshToken), IdentityRestCode.refreshTokenInvalid);
  });

  test("missing → refresh_token_required; unknown, malformed, expired, revoked → refresh_token_invalid", async () => {
    await rejects(f.identity.sessions.refresh(""), IdentityRestCode.refreshTokenRequired);
    await rejects(f.identity.sessions.refresh("rt_unknown"), IdentityRestCode.refreshTokenInvalid);
    await rejects(f.identity.sessions.refresh("garbage"), IdentityRestCode.refreshTokenInvalid);
    const u = await f.seedUser();
    const pair = await f.identity.sessions.login({ email: u.email, password: u.password });
    f.clock.advance(31 * 24 * 3600 * 1000);
    try {
      await rejects(f.identity.sessions.refresh(pair.refreshToken), IdentityRestCode.refreshTokenInvalid);
    } finally {
      f.clock.reset();
    }
    const other = await f.identity.sessions.login({ email: u.email, password: u.password });
    await f.identity.sessions.logout(other.refreshToken);
    await rejects(f.identity.sessions.refresh(other.refreshToken), IdentityRestCode.refreshTokenInvalid);
  });

  test("a user removed from the org cannot refresh", async () => {
    const u = await f.seedUser();
    const pair = await f.identity.sessions.login({ email: u.email, password: u.password });
    await f.identity.db.deleteFrom("memberships").where("user_id", "=", u.user.id).execute();
    await rejects(f.identity.sessions.refresh(pair.refreshToken), IdentityRestCode.refreshTokenInvalid);
  });

  test("100 concurrent refreshes of one token: exactly one wins, the others are reuse, the family ends revoked", async () => {
    const u = await f.seedUser();
    const pair = await f.identity.sessions.login({ email: u.email, password: u.password });
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, () => f.identity.sessions.refresh(pair.refreshToken)),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    const reasons = results.flatMap((r) =>
      r.status === "rejected" ? [(r.reason as PlatformError).reason ?? String(r.reason)] : [],
    );
    assert.equal(won.length, 1, `winners: ${won.length}`);
    assert.equal(reasons.length, 99);
    assert.ok(
      reasons.every((r) => r === IdentityRestCode.refreshTokenReused),
      JSON.stringify([...new Set(reasons)]),
    );
    const families = await f.identity.db
      .selectFrom("refresh_token_families")
      .select("revoked_at")
      .where("user_id", "=", u.user.id)
      .execute();
    assert.equal(families.length, 1);
    assert.ok(families[0]!.revoked_at, "family revoked");
    const winner = (won[0] as PromiseFulfilledResult<{ refreshToken: string }>).value;
    await rejects(f.identity.sessions.refresh(winner.refreshToken), IdentityRestCode.refreshTokenInvalid);
  });
});

describe("logout and revoke-all", () => {
  test("logout revokes the family; unknown or empty tokens are a no-op", async () => {
    await f.identity.sessions.logout("");
    await f.identity.sessions.logout("rt_nope");
    await f.identity.sessions.logout("not even a token");
    const u = await f.seedUser();
    const pair = await f.identity.sessions.login({ email: u.email, password: u.password });
    await f.identity.sessions.logout(pair.refreshToken);
    await f.identity.sessions.logout(pair.refreshToken);
    await rejects(f.identity.sessions.refresh(pair.refreshToken), IdentityRestCode.refreshTokenInvalid);
  });

  test("revoke-all: owner only, target must be in the caller's org, every live token of the target revoked", async () => {
    const owner = await f.seedUser({ role: "owner" });
    const member = await f.seedUser({ role: "member", orgId: owner.orgId });
    const stranger = await f.seedUser();
    const a = await f.identity.sessions.login({ email: member.email, password: member.password });
    const b = await f.identity.sessions.login({ email: member.email, password: member.password });
    const mine = await f.identity.sessions.login({ email: owner.email, password: owner.password });

    await rejects(f.identity.sessions.revokeAll(member.ctx(), owner.user.id), IdentityRestCode.insufficientRole);
    await rejects(f.identity.sessions.revokeAll(owner.ctx(), ""), IdentityRestCode.userIdRequired);
    await rejects(f.identity.sessions.revokeAll(owner.ctx(), "not-a-uuid"), IdentityRestCode.userIdInvalid);
    await rejects(f.identity.sessions.revokeAll(owner.ctx(), stranger.user.id), IdentityRestCode.resourceNotFound);

    await f.identity.sessions.revokeAll(owner.ctx(), member.user.id);
    await rejects(f.identity.sessions.refresh(a.refreshToken), IdentityRestCode.refreshTokenInvalid);
    await rejects(f.identity.sessions.refresh(b.refreshToken), IdentityRestCode.refreshTokenInvalid);
    // The owner's own session is untouched.
    await f.identity.sessions.refresh(mine.refreshToken);
  });
});
