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

export interface AgentsDB {
  agents: AgentsTable;
  sessions: SessionsTable;
  session_events: SessionEventsTable;
  session_tool_decisions: SessionToolDecisionsTable;
}
