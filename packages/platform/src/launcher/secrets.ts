import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Secrets the embedded shape generates once and keeps in its data directory (0600). */
export type LocalSecrets = { kek: string; ownerPassword: string; createdAt: string };

export function loadOrCreateSecrets(dataDir: string): { secrets: LocalSecrets; created: boolean } {
  const path = join(dataDir, "secrets.json");
  if (existsSync(path)) return { secrets: JSON.parse(readFileSync(path, "utf8")) as LocalSecrets, created: false };
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const secrets: LocalSecrets = {
    kek: randomBytes(32).toString("hex"),
    // Readable but strong: 24 base64url characters, 144 bits.
    ownerPassword: randomBytes(18).toString("base64url"),
    createdAt: new Date().toISOString(),
  };
  writeFileSync(path, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return { secrets, created: true };
}
