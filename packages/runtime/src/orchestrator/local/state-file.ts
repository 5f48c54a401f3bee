import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { DeploymentSpec } from "../orchestrator.ts";

/** One deployment as the local orchestrator persists it. */
export interface StoredDeployment {
  spec: DeploymentSpec;
  replicas: number;
  annotations: Record<string, string>;
  /** The worker's port, kept across restarts so the endpoint stays stable. */
  port: number;
}

interface StateFile {
  version: 1;
  deployments: Record<string, StoredDeployment>;
}

/** Reads the state file; a missing file is an empty state. */
export async function loadState(path: string): Promise<Map<string, StoredDeployment>> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return new Map();
    throw err;
  }
  const parsed = JSON.parse(text) as StateFile;
  if (parsed.version !== 1 || typeof parsed.deployments !== "object") {
    throw new Error(`${path}: not a runtime orchestrator state file (version 1)`);
  }
  return new Map(Object.entries(parsed.deployments));
}

/** Writes the whole state atomically (temp file + rename), so a crash never leaves half a file. */
export async function saveState(path: string, items: Map<string, StoredDeployment>): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const body: StateFile = { version: 1, deployments: Object.fromEntries(items) };
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600 });
  await rename(tmp, path);
}
