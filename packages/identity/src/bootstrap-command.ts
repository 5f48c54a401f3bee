// `node --import tsx packages/identity/src/bootstrap-command.ts`: creates the
// initial owner and organization from BOOTSTRAP_OWNER_EMAIL,
// BOOTSTRAP_OWNER_PASSWORD, BOOTSTRAP_ORG_NAME (optional BOOTSTRAP_OWNER_NAME,
// BOOTSTRAP_ORG_SLUG) on the configured database. Once any owner exists,
// re-running changes nothing, whatever email it is given.
import { ConfigError } from "@platform/config";
import { identityFromSettings, migrateForSettings, openIdentityDatabase } from "./app.ts";
import { loadSettings } from "./config/settings.ts";

try {
  const settings = loadSettings(process.env);
  if (!settings.bootstrap)
    throw new ConfigError("BOOTSTRAP_OWNER_EMAIL", "BOOTSTRAP_OWNER_EMAIL is required for the bootstrap command");
  const database = await openIdentityDatabase(settings);
  try {
    await migrateForSettings(settings, database);
    const identity = identityFromSettings(database, settings);
    await identity.keys.ensureActiveKey();
    const result = await identity.bootstrap(settings.bootstrap);
    process.stdout.write(
      result.created
        ? `created owner ${settings.bootstrap.email} (user ${result.userId}) and organization ${result.orgId}\n`
        : `an owner already exists (user ${result.userId}); nothing changed, whatever the email\n`,
    );
  } finally {
    await database.close();
  }
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`identity bootstrap: invalid configuration: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`identity bootstrap: failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
