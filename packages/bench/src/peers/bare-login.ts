import { createHash, generateKeyPairSync, randomBytes, randomUUID, sign } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { openDatabase } from "@platform/db";
import { ARGON2_DEFAULTS, Semaphore } from "@platform/identity";
import argon2 from "argon2";
import { CompiledQuery } from "kysely";

const SCHEMA = `
create table if not exists floor_users (id uuid primary key, email text not null unique, password_hash text not null, org_id uuid not null);
create table if not exists floor_refresh_tokens (id uuid primary key, user_id uuid not null, org_id uuid not null,
  token_hash bytea not null unique, created_at timestamptz not null default now(), expires_at timestamptz not null);`;
const FIND_USER = "select id, password_hash, org_id from floor_users where email = $1";
const INSERT_TOKEN =
  "insert into floor_refresh_tokens (id, user_id, org_id, token_hash, expires_at) values ($1, $2, $3, $4, $5)";
const JWT_TTL_S = 900;
const REFRESH_TTL_MS = 30 * 24 * 3600 * 1000;

/**
 * The least a password login can be: node:http, POST /v1/auth/login with
 * `{email, password}` answered with an access token and a refresh token as
 * identity answers it, doing only what any login must: one statement for the
 * user and its hash, argon2id verify at identity's parameters and
 * concurrency (ARGON2_DEFAULTS, identity's FIFO semaphore), one statement storing the
 * refresh token's hash, an RS256 signature of the access token's claims
 * (node:crypto, RSA-2048). No routing, validation, throttle, audit, log or
 * framework: the floor the login figure's ratio to raw argon2id is judged
 * against, i.e. what this machine allows a login server beside its hashes.
 * Its tables live in a database of its own (`url`, or PGlite in memory).
 */
export async function startBareLogin(
  host: string,
  account: { email: string; password: string },
  url?: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const database = await openDatabase({ ...(url ? { url } : {}), maxConnections: 20 });
  await database.exec(SCHEMA);
  // On PostgreSQL a named prepared statement on a pooled connection without kysely; on PGlite its one connection.
  const query = async <R>(text: string, values: unknown[]): Promise<R[]> =>
    database.run
      ? database.run<R>(text, values)
      : ((await database.db.executeQuery(CompiledQuery.raw(text, values))).rows as R[]);
  const hash = await argon2.hash(account.password, {
    type: argon2.argon2id,
    memoryCost: ARGON2_DEFAULTS.memoryKiB,
    timeCost: ARGON2_DEFAULTS.timeCost,
    parallelism: ARGON2_DEFAULTS.parallelism,
  });
  await query("insert into floor_users (id, email, password_hash, org_id) values ($1, $2, $3, $4)", [
    randomUUID(),
    account.email.toLowerCase(),
    hash,
    randomUUID(),
  ]);
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const header = Buffer.from(JSON.stringify({ alg: "RS256", typ: "JWT", kid: "floor" })).toString("base64url");

  // identity's own semaphore, unbounded queue: the floor never sheds.
  const hashing = new Semaphore(ARGON2_DEFAULTS.maxConcurrent);
  const verify = (stored: string, password: string) => hashing.run(() => argon2.verify(stored, password));

  const login = async (email: string, password: string): Promise<object | undefined> => {
    const [user] = await query<{ id: string; password_hash: string; org_id: string }>(FIND_USER, [email.toLowerCase()]);
    if (!user || !(await verify(user.password_hash, password))) return undefined;
    const raw = `rt_${randomBytes(32).toString("base64url")}`;
    const now = Date.now();
    await query(INSERT_TOKEN, [
      randomUUID(),
      user.id,
      user.org_id,
      createHash("sha256").update(raw).digest(),
      new Date(now + REFRESH_TTL_MS),
    ]);
    const iat = Math.floor(now / 1000);
    const claims = { iss: "floor", sub: user.id, org_id: user.org_id, role: "owner", iat, exp: iat + JWT_TTL_S };
    const input = `${header}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`;
    const signature = sign("sha256", Buffer.from(input), privateKey).toString("base64url");
    return { access_token: `${input}.${signature}`, token_type: "Bearer", expires_in: JWT_TTL_S, refresh_token: raw };
  };

  const answer = (res: http.ServerResponse, status: number, body: object) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text);
  };
  const server = http.createServer((req, res) => {
    if (req.method !== "POST" || req.url !== "/v1/auth/login") return answer(res, 404, { error: "not_found" });
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body: { email?: unknown; password?: unknown };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return answer(res, 400, { error: "invalid_request" });
      }
      if (typeof body.email !== "string" || typeof body.password !== "string")
        return answer(res, 400, { error: "invalid_request" });
      login(body.email, body.password).then(
        (pair) => (pair ? answer(res, 200, pair) : answer(res, 401, { error: "unauthenticated" })),
        () => answer(res, 500, { error: "internal" }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await database.close();
    },
  };
}
