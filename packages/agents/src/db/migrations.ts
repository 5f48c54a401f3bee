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
  {
    // Usage and budgets (issue 20 item 6): one row per model call and per
    // tool call, with its time, summed for any range; no foreign key, so a
    // deleted session's usage still counts for its agent and org. Budgets of
    // agents and of sessions: {maxTokens?, maxToolCalls?, maxCpuSeconds?}.
    // Numbered 0008: 0007 belongs to another change (the migrator applies
    // what is missing by name, so either may land first).
    name: "0008_usage_budgets",
    sql: `
alter table agents add column budgets jsonb not null default '{}'::jsonb;
alter table sessions add column budgets jsonb not null default '{}'::jsonb;

create table usage_records (
  id bigint generated always as identity primary key,
  org_id uuid not null,
  agent_id uuid not null,
  session_id uuid not null,
  run_id uuid,
  kind text not null check (kind in ('model', 'tool')),
  model text not null default '',
  tool text not null default '',
  input_tokens bigint not null default 0,
  output_tokens bigint not null default 0,
  cpu_ms bigint not null default 0,
  wall_ms bigint not null default 0,
  at timestamptz not null
);
create index usage_records_session on usage_records (session_id, at);
create index usage_records_org_at on usage_records (org_id, at);
create index usage_records_org_agent_at on usage_records (org_id, agent_id, at);
`,
  },
  {
    // Messages sent while a run holds the session (issue 20 items 2 and 3):
    // each such send is a `message_queued` event in the log at once, and a
    // row of session_queue until a run takes it; that run's message events
    // name it (queued_seq) and are stored in the statement that deletes the
    // row, so a queued send is taken exactly once, across crashes. The
    // cancel flag gains a reason: an interrupt ends the run differently.
    name: "0007_message_queue",
    sql: `
alter table session_events add column queued_seq bigint;
alter table sessions add column cancel_reason text;

create table session_queue (
  session_id uuid not null references sessions (id) on delete cascade,
  seq bigint not null,
  interrupt boolean not null default false,
  created_at timestamptz not null default now(),
  primary key (session_id, seq)
);
`,
  },
  {
    // Schedules of an agent (issue 25) and their firings. A firing row is
    // unique per (schedule, slot): whichever replica inserts it fires the
    // slot, so a slot fires at most once across replicas and restarts;
    // replicas claim due schedules with FOR UPDATE SKIP LOCKED so they do
    // not queue on each other. `next_run_at` is null while paused.
    name: "0009_schedules",
    sql: `
create table agent_schedules (
  id uuid primary key,
  pos bigint generated always as identity unique,
  org_id uuid not null,
  agent_id uuid not null references agents (id),
  created_by text not null,
  cron text not null,
  time_zone text not null,
  message text not null,
  target text not null check (target in ('new_session', 'session')),
  session_id uuid,
  catch_up text not null check (catch_up in ('skip', 'one')),
  enabled boolean not null default true,
  next_run_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index agent_schedules_org_agent_pos on agent_schedules (org_id, agent_id, pos desc);
create index agent_schedules_due on agent_schedules (next_run_at) where enabled;

create table schedule_firings (
  id uuid primary key,
  pos bigint generated always as identity unique,
  schedule_id uuid not null references agent_schedules (id) on delete cascade,
  slot_time timestamptz not null,
  fired_at timestamptz not null,
  status text not null check (status in ('claimed', 'started', 'queued', 'skipped', 'failed')),
  reason text not null default '',
  session_id uuid,
  run_id uuid,
  unique (schedule_id, slot_time)
);
create index schedule_firings_schedule_pos on schedule_firings (schedule_id, pos desc);
`,
  },
  {
    // The agent's network policy (issue 21): compute's NetworkPolicy (jsonb),
    // null for none. Numbered 0010 by the issue's own helper; the migrator
    // applies what is missing by name, so another 0010 may land beside it.
    name: "0010_agent_network_policy",
    sql: `alter table agents add column network_policy jsonb;`,
  },
  {
    // Issue 22: the sandbox image of the agent's sessions ('' = compute's default).
    name: "0011_agent_image",
    sql: `alter table agents add column image text not null default '';`,
  },
  {
    // Issue 25: the session events organizations' webhooks hear of, copied by
    // a trigger in the transaction that stores them (so none is lost), for
    // the relay (webhooks/relay.ts) to hand to identity and delete. A cursor
    // over session_events cannot do it: its order is per session (seq), and
    // rows of concurrent runs commit out of any global order.
    name: "0010_webhook_relay",
    sql: `
create table webhook_relay (
  id uuid primary key,
  pos bigint generated always as identity,
  org_id uuid not null,
  session_id uuid not null,
  agent_id uuid not null,
  run_id uuid,
  seq bigint not null,
  type text not null,
  content text not null,
  tokens_in bigint not null default 0,
  tokens_out bigint not null default 0,
  occurred_at timestamptz not null,
  claimed_until timestamptz
);
create index webhook_relay_pos on webhook_relay (pos);

create function agents_webhook_relay() returns trigger language plpgsql as $$
begin
  if new.type in ('done', 'error', 'requires_action', 'budget_reached')
     or (new.type = 'sandbox_replaced' and new.content like '%"reason":"failed"%') then
    insert into webhook_relay (id, org_id, session_id, agent_id, run_id, seq, type, content, tokens_in, tokens_out, occurred_at)
    select gen_random_uuid(), s.org_id, s.id, s.agent_id, new.run_id, new.seq, new.type, new.content,
           new.tokens_in, new.tokens_out, new.created_at
    from sessions s where s.id = new.session_id;
  end if;
  return null;
end
$$;
create trigger session_events_webhook_relay after insert on session_events
  for each row execute function agents_webhook_relay();
`,
  },
  {
    // Text tokens are nearly every row stored and never relayed: a WHEN clause
    // keeps the plpgsql call off their commit (the function's own test stays).
    name: "0012_webhook_relay_when",
    sql: `
drop trigger session_events_webhook_relay on session_events;
create trigger session_events_webhook_relay after insert on session_events
  for each row
  when (new.type in ('done', 'error', 'requires_action', 'budget_reached', 'sandbox_replaced'))
  execute function agents_webhook_relay();
`,
  },
];
