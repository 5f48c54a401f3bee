import type { Migration } from "@platform/db";

export const MIGRATIONS_TABLE = "compute_migrations";

export const migrations: Migration[] = [
  {
    name: "0001_sandboxes",
    sql: `
create table compute_sandboxes (
  id uuid primary key,
  tenant_id uuid not null,
  session_id uuid not null,
  image text not null,
  storage_class text not null,
  workspace_size text not null,
  mount_path text not null,
  cpu_millis integer not null,
  memory_bytes bigint not null,
  max_runtime_ms bigint not null,
  status text not null check (status in ('STARTING', 'READY', 'FAILED', 'DESTROYED')),
  failure_reason text,
  driver text not null,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  destroyed_at timestamptz,
  total_usage jsonb
);
create index compute_sandboxes_live on compute_sandboxes (status) where status in ('STARTING', 'READY');
create index compute_sandboxes_session on compute_sandboxes (tenant_id, session_id);
`,
  },
  {
    // Pause/resume (issue 18): the PAUSED status, the idle period each
    // sandbox was created with, and the paused time max_runtime leaves out.
    name: "0002_pause",
    sql: `
alter table compute_sandboxes drop constraint compute_sandboxes_status_check;
alter table compute_sandboxes add constraint compute_sandboxes_status_check
  check (status in ('STARTING', 'READY', 'PAUSED', 'FAILED', 'DESTROYED'));
alter table compute_sandboxes add column idle_timeout_ms bigint not null default 0;
alter table compute_sandboxes add column paused_ms bigint not null default 0;
alter table compute_sandboxes add column paused_at timestamptz;
drop index compute_sandboxes_live;
create index compute_sandboxes_live on compute_sandboxes (status) where status in ('STARTING', 'READY', 'PAUSED');
`,
  },
  {
    // Sandbox network (issue 21): the policy each sandbox runs under (null:
    // no network), and every connection attempt through its egress proxy.
    name: "0003_network",
    sql: `
alter table compute_sandboxes add column network_policy jsonb;
create table compute_network_events (
  sandbox_id uuid not null,
  seq bigint not null,
  at timestamptz not null,
  host text not null,
  port integer not null,
  address text not null,
  allowed boolean not null,
  reason text not null,
  protocol text not null,
  egress_bytes bigint not null,
  ingress_bytes bigint not null,
  duration_ms integer not null,
  primary key (sandbox_id, seq)
);
`,
  },
];
