import type { ColumnType, Generated } from "kysely";

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type NullableTimestamp = ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;

export type UsersTable = {
  id: string;
  email: string;
  name: string;
  password_hash: string;
  created_at: Timestamp;
};

export type OrgsTable = {
  id: string;
  name: string;
  slug: string;
  created_at: Timestamp;
  updated_at: Timestamp;
};

export type MembershipsTable = {
  user_id: string;
  org_id: string;
  role: "owner" | "member";
  created_at: Timestamp;
};

export type RefreshTokenFamiliesTable = {
  id: string;
  user_id: string;
  org_id: string;
  device_label: string | null;
  created_at: Timestamp;
  revoked_at: NullableTimestamp;
};

export type RefreshTokensTable = {
  id: string;
  family_id: string;
  token_hash: Uint8Array;
  created_at: Timestamp;
  expires_at: Timestamp;
  consumed_at: NullableTimestamp;
  revoked_at: NullableTimestamp;
};

export type ApiKeysTable = {
  id: string;
  /** Null for a key owned by the organization. */
  user_id: string | null;
  /** Who created the key (no foreign key: an org key outlives its creator). */
  created_by: string | null;
  org_id: string;
  name: string;
  key_prefix: string;
  key_hash: Uint8Array;
  env: "live" | "test";
  expires_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
  created_at: Timestamp;
  deleted_at: NullableTimestamp;
  /** Default: read, agents:write, sessions:run (what a key made before scopes could do). */
  scopes: Generated<string[]>;
};

export type SigningKeysTable = {
  kid: string;
  state: "pending" | "active" | "retiring" | "retired";
  algorithm: Generated<string>;
  public_der: Uint8Array;
  private_enc: Uint8Array;
  created_at: Timestamp;
  retired_at: NullableTimestamp;
  activated_at: NullableTimestamp;
  deactivated_at: NullableTimestamp;
};

export type IdempotencyKeysTable = {
  scope: string;
  key: string;
  method: string;
  request_hash: string;
  state: "running" | "done";
  response: Uint8Array | null;
  locked_until: Timestamp;
  expires_at: Timestamp;
  created_at: Timestamp;
};

export type InvitationsTable = {
  id: string;
  org_id: string;
  email: string;
  role: "owner" | "member";
  token_hash: Uint8Array;
  invited_by: string | null;
  created_at: Timestamp;
  expires_at: Timestamp;
  accepted_at: NullableTimestamp;
  accepted_by: string | null;
  revoked_at: NullableTimestamp;
};

export type AuditEventsTable = {
  id: Generated<string>;
  org_id: string | null;
  actor_user_id: string | null;
  actor_api_key_id: string | null;
  action: string;
  target_type: string | null;
  target_id: string | null;
  request_id: string | null;
  client_address: string | null;
  details: ColumnType<Record<string, unknown>, string | undefined, string>;
  created_at: Timestamp;
};

export type WebhookEndpointsTable = {
  id: string;
  org_id: string;
  url: string;
  event_types: string[];
  enabled: boolean;
  description: string;
  secret_sealed: Uint8Array;
  previous_secret_sealed: Uint8Array | null;
  previous_secret_expires_at: NullableTimestamp;
  failure_streak: Generated<number>;
  disabled_reason: string | null;
  created_by: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
};

export type WebhookEventsTable = {
  id: string;
  org_id: string;
  type: string;
  /** The exact body POSTed (and signed): the same bytes on every attempt. */
  payload: string;
  created_at: Timestamp;
};

export type WebhookDeliveriesTable = {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: "pending" | "succeeded" | "failed";
  attempt_count: Generated<number>;
  next_attempt_at: NullableTimestamp;
  created_at: Timestamp;
  completed_at: NullableTimestamp;
};

export type WebhookAttemptsTable = {
  id: Generated<string>;
  delivery_id: string;
  number: number;
  started_at: Timestamp;
  status_code: number;
  latency_ms: number;
  response_excerpt: string;
  error: string;
};

export type IdentityDB = {
  users: UsersTable;
  orgs: OrgsTable;
  memberships: MembershipsTable;
  refresh_token_families: RefreshTokenFamiliesTable;
  refresh_tokens: RefreshTokensTable;
  api_keys: ApiKeysTable;
  signing_keys: SigningKeysTable;
  idempotency_keys: IdempotencyKeysTable;
  invitations: InvitationsTable;
  audit_events: AuditEventsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
};
