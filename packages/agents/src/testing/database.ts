import { createTestDatabase } from "@platform/db/testing";
import { MIGRATIONS_TABLE, migrations } from "../db/migrations.ts";
import type { AgentsDB } from "../db/schema.ts";

/**
 * A fresh test database for an agents suite (PostgreSQL or PGlite, per
 * TEST_DB). On PGlite it starts with agents' migrations already applied
 * (createTestDatabase says why); the app applies them itself on PostgreSQL.
 */
export function createAgentsTestDatabase() {
  return createTestDatabase<AgentsDB>({ migrated: { table: MIGRATIONS_TABLE, migrations } });
}
