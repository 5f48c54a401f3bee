import { randomBytes } from "node:crypto";
import type { AuthContext, Role } from "../auth/auth-context.ts";
import type { Argon2Settings } from "../config/settings.ts";
import { migrateIdentity } from "../db/migrations.ts";
import { createIdentity, type Identity } from "../identity.ts";
import { addMembership } from "../users/memberships.ts";
import { createPooledTestDatabase } from "./database.ts";

/** Cheap argon2 for suites that are not about hashing cost. */
export const FAST_ARGON2: Argon2Settings = { memoryKiB: 1024, timeCost: 1, parallelism: 1, maxConcurrent: 4 };

/** A clock tests can move: `clock.advance(ms)`. */
export function movableClock() {
  let offset = 0;
  const clock = () => new Date(Date.now() + offset);
  return Object.assign(clock, {
    advance(ms: number) {
      offset += ms;
    },
    reset() {
      offset = 0;
    },
  });
}

let counter = 0;
const unique = () => `${Date.now().toString(36)}${(counter++).toString(36)}${randomBytes(3).toString("hex")}`;

export type Fixture = Awaited<ReturnType<typeof createFixture>>;

/** One migrated database (PostgreSQL or PGlite, per TEST_DB) and the identity domain on it. */
export async function createFixture(
  options: { argon2?: Argon2Settings; env?: "dev" | "staging" | "prod"; jwtTtlSeconds?: number } = {},
) {
  const database = await createPooledTestDatabase();
  await migrateIdentity(database as never);
  const clock = movableClock();
  const kek = randomBytes(32);
  const identity: Identity = createIdentity(database, {
    kek,
    env: options.env ?? "dev",
    jwtTtlSeconds: options.jwtTtlSeconds ?? 3600,
    refreshTokenTtlSeconds: 30 * 24 * 3600,
    argon2: options.argon2 ?? FAST_ARGON2,
    idempotencyLockMs: 30_000,
    clock,
  });
  await identity.keys.ensureActiveKey();
  // As the service does: with PostgreSQL the caches follow every writer's changes.
  const changes = database.url ? await identity.followChanges(database.url) : undefined;

  /** A user with a membership in a new org (or the given one). */
  async function seedUser(input: { role?: Role; orgId?: string; password?: string; email?: string } = {}) {
    const password = input.password ?? "correct horse battery staple";
    const email = input.email ?? `user-${unique()}@example.com`;
    const user = await identity.users.create({ email, name: "Test User", password });
    const orgId = input.orgId ?? (await identity.orgs.create({ name: `Org ${unique()}` })).id;
    await addMembership(identity.db, user.id, orgId, input.role ?? "owner");
    const ctx = (mode: "jwt" | "api_key" = "jwt"): AuthContext => ({
      userId: user.id,
      orgId,
      mode,
      role: input.role ?? "owner",
      env: "test",
      method: mode === "jwt" ? "jwt_session" : "api_key:sk_test_x",
    });
    const jwt = async () => (await identity.jwt.issue(user.id, orgId, 3600)).token;
    return { user, email, password, orgId, ctx, jwt };
  }

  return {
    database,
    identity,
    clock,
    kek,
    seedUser,
    close: async () => {
      await changes?.stop();
      await database.close();
    },
  };
}
