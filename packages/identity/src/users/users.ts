import { randomUUID } from "node:crypto";
import { isUniqueViolation, type RunPrepared } from "@platform/db";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type Kysely, sql } from "kysely";
import type { Role } from "../auth/auth-context.ts";
import type { IdentityDB } from "../db/schema.ts";
import type { PasswordHasher } from "../passwords/password-hasher.ts";

export type User = { id: string; email: string; name: string; createdAt: Date };
export type UserWithHash = User & { passwordHash: string };

const EMAIL_RE = /^[^\s@]+@[^\s@]+$/;

type LoginRow = {
  id: string;
  email: string;
  name: string;
  created_at: Date;
  password_hash: string;
  org_id: string | null;
  role: Role | null;
};
const LOGIN_SQL = `select u.id, u.email, u.name, u.created_at, u.password_hash, m.org_id, m.role
  from users u
  left join lateral (select org_id, role from memberships where user_id = u.id order by created_at, role desc limit 1) m on true
  where lower(u.email) = $1`;

export function validEmail(email: string): boolean {
  return email.length <= 320 && EMAIL_RE.test(email);
}

/** Users; email is case-insensitive (unique on lower(email)), stored as given. */
export class Users {
  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly hasher: PasswordHasher,
    /** Runs login's read (statementRunner: on PostgreSQL without kysely around it). */
    private readonly run: RunPrepared,
  ) {}

  async create(
    input: { email: string; name: string; password: string },
    db: Kysely<IdentityDB> = this.db,
  ): Promise<User> {
    if (!validEmail(input.email))
      throw PlatformError.invalidArgument("email is not valid", IdentityRestCode.invalidRequest);
    const id = randomUUID();
    const passwordHash = await this.hasher.hash(input.password);
    try {
      const row = await db
        .insertInto("users")
        .values({ id, email: input.email, name: input.name, password_hash: passwordHash })
        .returning(["id", "email", "name", "created_at"])
        .executeTakeFirstOrThrow();
      return { id: row.id, email: row.email, name: row.name, createdAt: row.created_at };
    } catch (err) {
      if (isUniqueViolation(err)) throw PlatformError.alreadyExists("email already registered");
      throw err;
    }
  }

  async findByEmail(email: string, db: Kysely<IdentityDB> = this.db): Promise<UserWithHash | undefined> {
    const row = await db
      .selectFrom("users")
      .select(["id", "email", "name", "created_at", "password_hash"])
      .where(sql<string>`lower(email)`, "=", email.toLowerCase())
      .executeTakeFirst();
    return (
      row && {
        id: row.id,
        email: row.email,
        name: row.name,
        createdAt: row.created_at,
        passwordHash: row.password_hash,
      }
    );
  }

  /**
   * Login's one read: the user by email and the org a password login lands in
   * (the oldest membership, owner first on ties), read together before the
   * hash is checked.
   */
  async findForLogin(
    email: string,
  ): Promise<(UserWithHash & { membership?: { orgId: string; role: Role } }) | undefined> {
    const [r] = await this.run<LoginRow>(LOGIN_SQL, [email.toLowerCase()]);
    if (!r) return undefined;
    const user = { id: r.id, email: r.email, name: r.name, createdAt: r.created_at, passwordHash: r.password_hash };
    return r.org_id && r.role ? { ...user, membership: { orgId: r.org_id, role: r.role } } : user;
  }

  async get(id: string): Promise<User> {
    const row = await this.db
      .selectFrom("users")
      .select(["id", "email", "name", "created_at"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) throw PlatformError.notFound("user not found", IdentityRestCode.resourceNotFound);
    return { id: row.id, email: row.email, name: row.name, createdAt: row.created_at };
  }
}
