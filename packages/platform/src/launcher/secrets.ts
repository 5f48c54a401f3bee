import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Secrets the embedded shape generates once and keeps in its data directory (0600). */
export type LocalSecrets = {
  kek: string;
  ownerPassword: string;
  createdAt: string;
  /** AGENTS_SECRETS_KEY (seals agents' MCP server headers); added to a data directory made before it existed. */
  agentsSecretsKey?: string;
};

export function loadOrCreateSecrets(dataDir: string): { secrets: LocalSecrets; created: boolean } {
  const path = join(dataDir, "secrets.json");
  if (existsSync(path)) {
    const secrets = JSON.parse(readFileSync(path, "utf8")) as LocalSecrets;
    if (!secrets.agentsSecretsKey) {
      secrets.agentsSecretsKey = randomBytes(32).toString("hex");
      writeFileSync(path, JSON.stringify(secrets, null, 2), { mode: 0o600 });
    }
    return { secrets, created: false };
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  const secrets: LocalSecrets = {
    kek: randomBytes(32).toString("hex"),
    // Readable but strong: 24 base64url characters, 144 bits.
    ownerPassword: randomBytes(18).toString("base64url"),
    createdAt: new Date().toISOString(),
    agentsSecretsKey: randomBytes(32).toString("hex"),
  };
  writeFileSync(path, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return { secrets, created: true };
}
