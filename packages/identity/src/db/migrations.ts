import { type Database, type Migration, migrate } from "@platform/db";

/** Forward-only schema of the identity database. */
export const identityMigrations: readonly Migration[] = [
  {
    name: "0001_initial",
    sql: `
create table users (
  id uuid primary key,
  email text not null,
  name text not null,
  password_hash text not null,
  created_at timestamptz not null default now()
);
-- Emails are case-insensitive: uniqueness and lookups go through lower(email).
create unique index users_email_lower_key on users (lower(email));

create table orgs (
  id uuid primary key,
  name text not null,
  slug text not null unique,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

create table memberships (
  user_id uuid not null references users (id) on delete cascade,
  org_id uuid not null references orgs (id) on delete cascade,
  role text not null check (role in ('owner', 'member')),
  created_at timestamptz not null default now(),
  primary key (user_id, org_id)
);
create index memberships_org_idx on memberships (org_id);

create table refresh_token_families (
  id uuid primary key,
  user_id uuid not null references users (id) on delete cascade,
  org_id uuid not null references orgs (id) on delete cascade,
  device_label text,
  created_at timestamptz not null default now(),
  revoked_at timestamptz
);
create index refresh_token_families_live_idx on refresh_token_families (user_id) where revoked_at is null;

create table refresh_tokens (
  id uuid primary key,
  family_id uuid not null references refresh_token_families (id) on delete cascade,
  token_hash bytea not null unique,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  consumed_at timestamptz,
  revoked_at timestamptz
);
create index refresh_tokens_family_idx on refresh_tokens (family_id);

create table api_keys (
  id uuid primary key,
  user_id uuid not null references users (id) on delete cascade,
  org_id uuid not null references orgs (id) on delete cascade,
  name text not null,
  key_prefix text not null,
  key_hash bytea not null unique,
  env text not null check (env in ('live', 'test')),
  expires_at timestamptz,
  last_used_at timestamptz,
  created_at timestamptz not null default now(),
  deleted_at timestamptz
);
create index api_keys_owner_idx on api_keys (user_id, org_id) where deleted_at is null;

create table signing_keys (
  kid text primary key,
  state text not null check (state in ('active', 'retired')),
  algorithm text not null default 'RS256',
  public_der bytea not null,
  private_enc bytea not null,
  created_at timestamptz not null default now(),
  retired_at timestamptz
);
-- At most one active key, enforced by the database so that replicas racing
-- at start-up cannot both activate one.
create unique index signing_keys_one_active on signing_keys ((true)) where state = 'active';

create table idempotency_keys (
  scope text not null,
  key text not null,
  method text not null,
  request_hash text not null,
  state text not null check (state in ('running', 'done')),
  response bytea,
  locked_until timestamptz not null,
  expires_at timestamptz not null,
  created_at timestamptz not null default now(),
  primary key (scope, key)
);
create index idempotency_keys_expiry_idx on idempotency_keys (expires_at);
`,
  },
  {
    // Identity caches memberships, API keys and signing-key states per
    // process (cache/); every change that could make a cached answer wrong
    // is announced to all replicas on identity_auth, also when made by hand
    // in SQL. INSERTs are not: absence is never cached.
    name: "0002_auth_change_notify",
    sql: `
create function identity_notify_membership() returns trigger language plpgsql as $$
begin
  perform pg_notify('identity_auth', 'm:' || old.user_id || ':' || old.org_id);
  return null;
end $$;
create trigger memberships_changed after update or delete on memberships
  for each row execute function identity_notify_membership();

create function identity_notify_api_key() returns trigger language plpgsql as $$
begin
  perform pg_notify('identity_auth', 'k:' || encode(old.key_hash, 'hex'));
  return null;
end $$;
-- last_used_at is not among the columns: its updates change no verification.
create trigger api_keys_changed after update of user_id, org_id, key_prefix, key_hash, env, expires_at, deleted_at or delete on api_keys
  for each row execute function identity_notify_api_key();

create function identity_notify_signing_key() returns trigger language plpgsql as $$
begin
  perform pg_notify('identity_auth', 's:' || old.kid);
  return null;
end $$;
create trigger signing_keys_changed after update or delete on signing_keys
  for each row execute function identity_notify_signing_key();
`,
  },
  {
    // Idempotency records now hold the key's SHA-256 and a response sealed
    // under the KEK (idempotency/sealed-response.ts). Records written before
    // held CreateAPIKey's raw_key in plain text: they are dropped (a retry of
    // a request from before the upgrade runs again instead of replaying).
    name: "0003_idempotency_sealed",
    sql: `
delete from idempotency_keys;
comment on column idempotency_keys.key is 'hex SHA-256 of the Idempotency-Key';
comment on column idempotency_keys.response is 'AES-256-GCM under HKDF(KEK, scope, Idempotency-Key)';
`,
  },
];

export const MIGRATIONS_TABLE = "identity_migrations";

export function migrateIdentity(database: Database<unknown>): Promise<string[]> {
  return migrate(database, MIGRATIONS_TABLE, identityMigrations);
}
