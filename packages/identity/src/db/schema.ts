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
  user_id: string;
  org_id: string;
  name: string;
  key_prefix: string;
  key_hash: Uint8Array;
  env: "live" | "test";
  expires_at: NullableTimestamp;
  last_used_at: NullableTimestamp;
  created_at: Timestamp;
  deleted_at: NullableTimestamp;
};

export type SigningKeysTable = {
  kid: string;
  state: "active" | "retired";
  algorithm: Generated<string>;
  public_der: Uint8Array;
  private_enc: Uint8Array;
  created_at: Timestamp;
  retired_at: NullableTimestamp;
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

export type IdentityDB = {
  users: UsersTable;
  orgs: OrgsTable;
  memberships: MembershipsTable;
  refresh_token_families: RefreshTokenFamiliesTable;
  refresh_tokens: RefreshTokensTable;
  api_keys: ApiKeysTable;
  signing_keys: SigningKeysTable;
  idempotency_keys: IdempotencyKeysTable;
};
