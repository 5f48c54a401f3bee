// `node --import tsx packages/identity/src/migrate-command.ts`: applies the
// identity migrations and exits (the cluster shape's migrations Job). Uses
// MIGRATION_DB_URL (a direct, session-mode connection), else DATABASE_URL;
// needs no other setting.
import { openDatabase } from "@platform/db";
import { migrateIdentity } from "./db/migrations.ts";

const url = process.env.MIGRATION_DB_URL?.trim() || process.env.DATABASE_URL?.trim();
if (!url) {
  process.stderr.write("identity migrate: invalid configuration: MIGRATION_DB_URL: is required (or DATABASE_URL)\n");
  process.exit(2);
}
try {
  const database = await openDatabase({ url, maxConnections: 1, minConnections: 0 });
  try {
    const applied = await migrateIdentity(database);
    process.stdout.write(applied.length ? `applied ${applied.join(", ")}\n` : "identity schema up to date\n");
  } finally {
    await database.close();
  }
} catch (err) {
  process.stderr.write(`identity migrate: failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
