import { createTestDatabase } from "@platform/db/testing";
import { MIGRATIONS_TABLE, migrations } from "../store/migrations.ts";

/**
 * A fresh test database for a compute suite (PostgreSQL or PGlite, per
 * TEST_DB). On PGlite it starts with compute's migrations already applied
 * (createTestDatabase says why); the service applies them itself on PostgreSQL.
 */
export function createComputeTestDatabase() {
  return createTestDatabase<unknown>({ migrated: { table: MIGRATIONS_TABLE, migrations } });
}
