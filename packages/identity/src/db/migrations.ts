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
  {
    // Issue 19: invitations to an organization (single use, expiring, only
    // the token's SHA-256 kept) and the audit log of identity's mutations.
    name: "0004_teams",
    sql: `
create table invitations (
  id uuid primary key,
  org_id uuid not null references orgs (id) on delete cascade,
  email text not null,
  role text not null check (role in ('owner', 'member')),
  token_hash bytea not null unique,
  invited_by uuid references users (id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  accepted_by uuid references users (id) on delete set null,
  revoked_at timestamptz
);
create index invitations_pending_idx on invitations (org_id, lower(email)) where accepted_at is null and revoked_at is null;

-- Append-only. No foreign keys: an entry outlives the user, key or org it names.
create table audit_events (
  id bigint generated always as identity primary key,
  org_id uuid,
  actor_user_id uuid,
  actor_api_key_id uuid,
  action text not null,
  target_type text,
  target_id text,
  request_id text,
  client_address text,
  details jsonb not null default '{}',
  created_at timestamptz not null default now()
);
create index audit_events_org_idx on audit_events (org_id, id desc);
`,
  },
  {
    // Issue 19: scheduled signing-key rotation (keys/signing-keys.ts
    // advanceRotation). Two states beside the spec's active and retired: a
    // pending key is published and verifies before it signs; a retiring key
    // stopped signing and verifies until its tokens can no longer be valid.
    name: "0005_signing_key_rotation",
    sql: `
alter table signing_keys drop constraint signing_keys_state_check;
alter table signing_keys add constraint signing_keys_state_check check (state in ('pending', 'active', 'retiring', 'retired'));
alter table signing_keys add column activated_at timestamptz;
alter table signing_keys add column deactivated_at timestamptz;
update signing_keys set activated_at = created_at where state = 'active';
create unique index signing_keys_one_pending on signing_keys ((true)) where state = 'pending';
`,
  },
  {
    // Issue 19: API key scopes (api-keys/scopes.ts). Every key made before
    // scopes existed keeps what it could do: all but admin, which gives what
    // no key could do then (managing members).
    name: "0006_api_key_scopes",
    sql: `
alter table api_keys add column scopes text[] not null default '{read,agents:write,sessions:run}';
`,
  },
  {
    // Issue 19: organization-owned API keys (api-keys/api-keys.ts). Such a
    // key has no user_id, so neither a member's removal nor a user's deletion
    // touches it; created_by says who made it (no foreign key: it outlives
    // the user, like the audit log). Existing keys: their user made them.
    name: "0007_org_api_keys",
    sql: `
alter table api_keys alter column user_id drop not null;
alter table api_keys add column created_by uuid;
update api_keys set created_by = user_id;
create index api_keys_org_owned_idx on api_keys (org_id) where user_id is null and deleted_at is null;
`,
  },
  {
    // Issue 25: webhooks (webhooks/). An organization's endpoints with their
    // signing secrets sealed under the KEK (signing needs the secret itself);
    // events accepted once by id; one delivery per (endpoint, event), written
    // before any attempt (the outbox) and claimed with FOR UPDATE SKIP LOCKED;
    // every attempt logged.
    name: "0008_webhooks",
    sql: `
create table webhook_endpoints (
  id uuid primary key,
  org_id uuid not null references orgs (id) on delete cascade,
  url text not null,
  event_types text[] not null,
  enabled boolean not null default true,
  description text not null default '',
  secret_sealed bytea not null,
  previous_secret_sealed bytea,
  previous_secret_expires_at timestamptz,
  failure_streak integer not null default 0,
  disabled_reason text,
  created_by uuid,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index webhook_endpoints_org_idx on webhook_endpoints (org_id, created_at desc);

create table webhook_events (
  id uuid primary key,
  org_id uuid not null references orgs (id) on delete cascade,
  type text not null,
  payload text not null,
  created_at timestamptz not null default now()
);

create table webhook_deliveries (
  id uuid primary key,
  webhook_id uuid not null references webhook_endpoints (id) on delete cascade,
  event_id uuid not null references webhook_events (id) on delete cascade,
  event_type text not null,
  status text not null check (status in ('pending', 'succeeded', 'failed')),
  attempt_count integer not null default 0,
  next_attempt_at timestamptz,
  created_at timestamptz not null default now(),
  completed_at timestamptz,
  unique (webhook_id, event_id)
);
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_log_idx on webhook_deliveries (webhook_id, created_at desc, id desc);

create table webhook_attempts (
  id bigint generated always as identity primary key,
  delivery_id uuid not null references webhook_deliveries (id) on delete cascade,
  number integer not null,
  started_at timestamptz not null,
  status_code integer not null default 0,
  latency_ms integer not null default 0,
  response_excerpt text not null default '',
  error text not null default ''
);
create index webhook_attempts_delivery_idx on webhook_attempts (delivery_id, id);
`,
  },
];

export const MIGRATIONS_TABLE = "identity_migrations";

export function migrateIdentity(database: Database<unknown>): Promise<string[]> {
  return migrate(database, MIGRATIONS_TABLE, identityMigrations);
}
