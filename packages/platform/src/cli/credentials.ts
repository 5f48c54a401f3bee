import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { configDir } from "./endpoints.ts";

/** The token pair of the logged-in user, per identity endpoint. */
export type Credentials = { accessToken: string; refreshToken: string; email: string };

type Store = Record<string, Credentials>;

const file = (env: NodeJS.ProcessEnv) => join(configDir(env), "credentials.json");

function readStore(env: NodeJS.ProcessEnv): Store {
  try {
    return JSON.parse(readFileSync(file(env), "utf8")) as Store;
  } catch {
    return {};
  }
}

export function loadCredentials(identity: string, env: NodeJS.ProcessEnv = process.env): Credentials | undefined {
  return readStore(env)[identity];
}

/** Written 0600: the file holds a refresh token. */
export function saveCredentials(
  identity: string,
  creds: Credentials | undefined,
  env: NodeJS.ProcessEnv = process.env,
): void {
  const store = readStore(env);
  if (creds) store[identity] = creds;
  else delete store[identity];
  mkdirSync(configDir(env), { recursive: true, mode: 0o700 });
  if (Object.keys(store).length === 0) {
    rmSync(file(env), { force: true });
    return;
  }
  writeFileSync(file(env), JSON.stringify(store, null, 2), { mode: 0o600 });
  chmodSync(file(env), 0o600);
}
