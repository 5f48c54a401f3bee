import type { ColumnType, Generated } from "kysely";

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface AgentsTable {
  id: string;
  pos: Generated<number>;
  org_id: string;
  name: string;
  slug: string;
  model: string;
  system_prompt: string;
  /** Tool name → `allow` | `ask` (jsonb; written as JSON text). */
  tool_permissions: ColumnType<Record<string, string>, string | undefined, string>;
  /** [{name, url, headerNames, sealedHeaders?}] (jsonb; written as JSON text). */
  mcp_servers: ColumnType<unknown, string | undefined, string>;
  /** [{name, description, inputSchema}] (jsonb; written as JSON text). */
  client_tools: ColumnType<unknown, string | undefined, string>;
  /** {maxTokens?, maxToolCalls?, maxCpuSeconds?} (jsonb; written as JSON text). */
  budgets: ColumnType<unknown, string | undefined, string>;
  /** compute's NetworkPolicy or null (jsonb; written as JSON text). */
  network_policy: ColumnType<unknown, string | null | undefined, string | null>;
  /** compute's sandbox image; '' = its default. */
  image: ColumnType<string, string | undefined, string>;
  created_at: Timestamp;
  updated_at: Timestamp;
  deleted_at: Generated<Date | null>;
}

export interface SessionsTable {
  id: string;
  pos: Generated<number>;
  org_id: string;
  agent_id: string;
  last_seq: Generated<number>;
  sandbox_id: string | null;
  active_run_id: string | null;
  run_lease_until: Date | null;
  run_owner: Generated<string | null>;
  cancel_requested: Generated<boolean>;
  /** Why the cancel was requested: null for a cancel, `interrupt` for a send that interrupts. */
  cancel_reason: Generated<string | null>;
  /** The session's own budgets (jsonb; written as JSON text). */
  budgets: ColumnType<unknown, string | undefined, string>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface SessionEventsTable {
  session_id: string;
  seq: number;
  run_id: string | null;
  type: string;
  content: string;
  tokens_in: number;
  tokens_out: number;
  tool_use_id: string;
  is_error: boolean;
  created_at: Timestamp;
  /** On a message a run took from the queue: the seq of its `message_queued` event. */
  queued_seq: Generated<number | null>;
}

/** Queued sends no run has taken yet (their `message_queued` events are in the log). */
export interface SessionQueueTable {
  session_id: string;
  seq: number;
  /** Sent with mode `interrupt`: taken before the sends queued earlier. */
  interrupt: Generated<boolean>;
  created_at: Timestamp;
}

export interface SessionToolDecisionsTable {
  session_id: string;
  request_seq: number;
  tool_use_id: string;
  decision: string;
  message: string;
  /** A `result` decision's content and error flag (a client tool's output). */
  result_content: Generated<string>;
  result_is_error: Generated<boolean>;
  created_at: Timestamp;
}

export interface AgentSchedulesTable {
  id: string;
  pos: Generated<number>;
  org_id: string;
  agent_id: string;
  created_by: string;
  cron: string;
  time_zone: string;
  message: string;
  target: string;
  session_id: string | null;
  catch_up: string;
  enabled: boolean;
  /** The slot the schedule fires next; null while paused. */
  next_run_at: Date | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface ScheduleFiringsTable {
  id: string;
  pos: Generated<number>;
  schedule_id: string;
  slot_time: Date;
  fired_at: Date;
  status: string;
  reason: Generated<string>;
  session_id: string | null;
  run_id: string | null;
}

export interface UsageRecordsTable {
  id: Generated<number>;
  org_id: string;
  agent_id: string;
  session_id: string;
  run_id: string | null;
  kind: string;
  model: string;
  tool: string;
  input_tokens: number;
  output_tokens: number;
  cpu_ms: number;
  wall_ms: number;
  at: Timestamp;
}

export interface AgentsDB {
  agents: AgentsTable;
  sessions: SessionsTable;
  session_events: SessionEventsTable;
  session_tool_decisions: SessionToolDecisionsTable;
  session_queue: SessionQueueTable;
  agent_schedules: AgentSchedulesTable;
  schedule_firings: ScheduleFiringsTable;
  usage_records: UsageRecordsTable;
  webhook_relay: WebhookRelayTable;
}

/** Session events waiting to be handed to identity's webhooks (migration 0010_webhook_relay). */
export interface WebhookRelayTable {
  id: string;
  pos: Generated<string>;
  org_id: string;
  session_id: string;
  agent_id: string;
  run_id: string | null;
  seq: number;
  type: string;
  content: string;
  tokens_in: number;
  tokens_out: number;
  occurred_at: Timestamp;
  claimed_until: Date | null;
}
