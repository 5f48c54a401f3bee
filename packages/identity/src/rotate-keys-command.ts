// `identity rotate-keys` (`node --import tsx packages/identity/src/rotate-keys-command.ts`):
// one step of signing-key rotation by hand, on the configured database, with
// the service's IDENTITY_KEY_* settings. Publishes the next key when none is
// pending (whatever the schedule); activates a pending key once it has been
// published IDENTITY_KEY_PREPUBLISH; retires keys past IDENTITY_KEY_RETENTION.
// It never shortens either period: run it again once the pending key is due.
import { ConfigError } from "@platform/config";
import { identityFromSettings, migrateForSettings, openIdentityDatabase } from "./app.ts";
import { loadSettings } from "./config/settings.ts";

try {
  const settings = loadSettings(process.env);
  const database = await openIdentityDatabase(settings);
  try {
    await migrateForSettings(settings, database);
    const identity = identityFromSettings(database, settings);
    await identity.keys.ensureActiveKey();
    const step = await identity.keys.advanceRotation(settings.keyRotation, { force: true });
    const lines: string[] = [];
    for (const kid of step.retired) lines.push(`retired ${kid}`);
    if (step.activated)
      lines.push(`activated ${step.activated} (${step.deactivated} stops signing; it verifies until retired)`);
    if (step.published)
      lines.push(
        `published ${step.published} (signs after ${settings.keyRotation.prePublishMs / 1000} s of pre-publication)`,
      );
    if (!step.activated && !step.published && step.pendingSince) {
      const at = new Date(step.pendingSince.getTime() + settings.keyRotation.prePublishMs);
      lines.push(`a key is pending; it can be activated at ${at.toISOString()}`);
    }
    process.stdout.write(`${lines.join("\n")}\n`);
  } finally {
    await database.close();
  }
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`identity rotate-keys: invalid configuration: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`identity rotate-keys: failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
