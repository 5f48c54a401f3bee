import { type Database, openDatabase } from "@platform/db";
import { createTestDatabase } from "@platform/db/testing";
import { identityMigrations, MIGRATIONS_TABLE } from "../db/migrations.ts";
import type { IdentityDB } from "../db/schema.ts";

/**
 * A fresh test database (PostgreSQL or PGlite, per TEST_DB; on PGlite with
 * identity's migrations already applied, see createTestDatabase) whose pool holds
 * at most `maxConnections`, like the service's DB_MAX_CONNS. The shared
 * PostgreSQL server has ~100 connection slots for every suite running at
 * once; a burst of 100 concurrent requests must queue at the pool (still
 * running 20 at a time in the database), not take every slot.
 */
export async function createPooledTestDatabase(maxConnections = 20): Promise<Database<IdentityDB> & { url?: string }> {
  const created = await createTestDatabase<IdentityDB>({
    migrated: { table: MIGRATIONS_TABLE, migrations: identityMigrations },
  });
  if (!created.url) return created;
  // `created` keeps its own (idle, min 0) pool: closing it drops the database.
  const pooled = await openDatabase<IdentityDB>({ url: created.url, maxConnections, minConnections: 0 });
  return {
    ...pooled,
    url: created.url,
    close: async () => {
      await pooled.close().catch(() => {});
      await created.close();
    },
  };
}
