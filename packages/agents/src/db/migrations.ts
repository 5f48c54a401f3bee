import type { Migration } from "@platform/db";

export const MIGRATIONS_TABLE = "agents_migrations";

export const migrations: Migration[] = [
  {
    name: "0001_agents_sessions_events",
    sql: `
create table agents (
  id uuid primary key,
  -- keyset position for pagination: insertion order, newest first
  pos bigint generated always as identity unique,
  org_id uuid not null,
  name text not null,
  slug text not null,
  model text not null,
  system_prompt text not null default '',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (org_id, slug)
);
create index agents_org_pos on agents (org_id, pos desc);

create table sessions (
  id uuid primary key,
  org_id uuid not null,
  agent_id uuid not null references agents (id),
  last_seq bigint not null default 0,
  sandbox_id text,
  active_run_id uuid,
  run_lease_until timestamptz,
  cancel_requested boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index sessions_org on sessions (org_id, id);

create table session_events (
  session_id uuid not null references sessions (id) on delete cascade,
  seq bigint not null,
  run_id uuid,
  type text not null,
  content text not null default '',
  tokens_in bigint not null default 0,
  tokens_out bigint not null default 0,
  tool_use_id text not null default '',
  is_error boolean not null default false,
  created_at timestamptz not null default now(),
  primary key (session_id, seq)
);
`,
  },
  {
    // Deleted agents stay as rows (their sessions keep pointing at them and
    // stay readable) but free their slug; sessions get a keyset position
    // for pagination, as agents have.
    name: "0002_agent_deletion_session_pages",
    sql: `
alter table agents add column deleted_at timestamptz;
alter table agents drop constraint agents_org_id_slug_key;
create unique index agents_org_slug_live on agents (org_id, slug) where deleted_at is null;

alter table sessions add column pos bigint generated always as identity;
create unique index sessions_pos on sessions (pos);
create index sessions_org_pos on sessions (org_id, pos desc);
create index sessions_org_agent_pos on sessions (org_id, agent_id, pos desc);
`,
  },
  {
    // The replica that started a session's run, so a replica that restarts
    // ends its own dead runs at once instead of after their lease; and the
    // sweep's index over the runs that hold a session.
    name: "0003_run_owner",
    sql: `
alter table sessions add column run_owner text;
create index sessions_held_runs on sessions (run_lease_until) where active_run_id is not null;
`,
  },
  {
    // Per-tool permission policies of an agent, and the answers to the tool
    // calls a run paused on. The pending calls themselves are the
    // `requires_action` event that ends the paused run (in session_events);
    // an answer names that event's seq, so an answer for an older pause can
    // never count for a newer one.
    name: "0004_tool_permissions",
    sql: `
alter table agents add column tool_permissions jsonb not null default '{}'::jsonb;

create table session_tool_decisions (
  session_id uuid not null references sessions (id) on delete cascade,
  request_seq bigint not null,
  tool_use_id text not null,
  decision text not null check (decision in ('allow', 'deny')),
  message text not null default '',
  created_at timestamptz not null default now(),
  primary key (session_id, request_seq, tool_use_id)
);
`,
  },
  {
    // Client tools (name, description, input schema) of an agent, and the
    // answer a client gives a call of one: a `result` decision carrying the
    // tool's output for the model.
    name: "0005_client_tools",
    sql: `
alter table agents add column client_tools jsonb not null default '[]'::jsonb;

alter table session_tool_decisions drop constraint session_tool_decisions_decision_check;
alter table session_tool_decisions add constraint session_tool_decisions_decision_check
  check (decision in ('allow', 'deny', 'result'));
alter table session_tool_decisions add column result_content text not null default '';
alter table session_tool_decisions add column result_is_error boolean not null default false;
`,
  },
  {
    // Remote MCP servers of an agent: [{name, url, headerNames,
    // sealedHeaders}], the header values sealed with AGENTS_SECRETS_KEY
    // (AES-256-GCM, bound to the org and the server's name); the API
    // returns names and URLs only.
    name: "0006_mcp_servers",
    sql: `
alter table agents add column mcp_servers jsonb not null default '[]'::jsonb;
`,
  },
];
