import { randomUUID } from "node:crypto";
import { isUniqueViolation } from "@platform/db";
import { IdentityRestCode, PlatformError } from "@platform/errors";
import { type Kysely, sql } from "kysely";
import type { IdentityDB } from "../db/schema.ts";
import type { PasswordHasher } from "../passwords/password-hasher.ts";

export type User = { id: string; email: string; name: string; createdAt: Date };
export type UserWithHash = User & { passwordHash: string };

const EMAIL_RE = /^[^\s@]+@[^\s@]+$/;

export function validEmail(email: string): boolean {
  return email.length <= 320 && EMAIL_RE.test(email);
}

/** Users; email is case-insensitive (unique on lower(email)), stored as given. */
export class Users {
  constructor(
    private readonly db: Kysely<IdentityDB>,
    private readonly hasher: PasswordHasher,
  ) {}

  async create(input: { email: string; name: string; password: string }, db: Kysely<IdentityDB> = this.db): Promise<User> {
    if (!validEmail(input.email)) throw PlatformError.invalidArgument("email is not valid", IdentityRestCode.invalidRequest);
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
    return row && { id: row.id, email: row.email, name: row.name, createdAt: row.created_at, passwordHash: row.password_hash };
  }

  async get(id: string): Promise<User> {
    const row = await this.db.selectFrom("users").select(["id", "email", "name", "created_at"]).where("id", "=", id).executeTakeFirst();
    if (!row) throw PlatformError.notFound("user not found", IdentityRestCode.resourceNotFound);
    return { id: row.id, email: row.email, name: row.name, createdAt: row.created_at };
  }
}
