import { join } from "node:path";
import { seedPgliteDataDir } from "@platform/db/testing";

/**
 * Gives a platform data directory's three embedded databases (where the
 * launcher puts them) a new cluster each, so the services started on it skip
 * PGlite's initdb: about 15 s of CPU per platform start on a 2-core machine.
 */
export async function seedEmbeddedDatabases(dataDir: string): Promise<void> {
  for (const dir of [join(dataDir, "identity"), join(dataDir, "agents"), join(dataDir, "compute", "pglite")])
    await seedPgliteDataDir(dir);
}
