import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";

/** Where each service answers, as the launcher writes it to platform.json. */
export type Endpoints = {
  identity: string;
  agents: string;
  router: string;
  identityGrpc?: string;
  computeGrpc?: string;
  agentsGrpc?: string;
  /** The e2b service (E2B's API for the e2b SDK), when the launcher starts it. */
  e2b?: string;
};

/** The launcher's data directory: PLATFORM_DATA_DIR, else ./.data. */
export function dataDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.PLATFORM_DATA_DIR ?? ".data");
}

/**
 * Endpoints from the environment (PLATFORM_IDENTITY_URL, PLATFORM_AGENTS_URL,
 * PLATFORM_ROUTER_URL) over platform.json in the data directory, so the CLI
 * works against a launcher on this machine and against a remote deployment.
 */
export function loadEndpoints(env: NodeJS.ProcessEnv = process.env): Endpoints {
  const { endpoints, path } = knownEndpoints(env);
  for (const key of ["identity", "agents", "router"] as const) {
    if (!endpoints[key]) {
      throw new CliError(
        `no ${key} endpoint: start the platform (bash scripts/run.sh) or set PLATFORM_${key.toUpperCase()}_URL (looked in ${path})`,
      );
    }
  }
  return endpoints as Endpoints;
}

/** Whatever endpoints platform.json and the environment name (the environment wins); none required. */
export function knownEndpoints(env: NodeJS.ProcessEnv = process.env): { endpoints: Partial<Endpoints>; path: string } {
  let file: Partial<Endpoints> = {};
  const path = join(dataDir(env), "platform.json");
  try {
    file = (JSON.parse(readFileSync(path, "utf8")) as { endpoints?: Partial<Endpoints> }).endpoints ?? {};
  } catch {
    // No launcher here: the environment must name the endpoints.
  }
  return {
    endpoints: {
      ...file,
      identity: env.PLATFORM_IDENTITY_URL ?? file.identity,
      agents: env.PLATFORM_AGENTS_URL ?? file.agents,
      router: env.PLATFORM_ROUTER_URL ?? file.router,
    },
    path,
  };
}

/** Directory for the CLI's stored tokens: PLATFORM_CONFIG_DIR, else ~/.config/agent-platform. */
export function configDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.PLATFORM_CONFIG_DIR ?? join(env.XDG_CONFIG_HOME ?? join(homedir(), ".config"), "agent-platform"));
}

/** A mistake in the command line: printed with the command's usage, exit status 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

/** Something to fix before the command can work (not logged in, no endpoints): exit status 1, no stack trace. */
export class CliError extends Error {
  override name = "CliError";
  constructor(
    message: string,
    readonly code = "cli_error",
  ) {
    super(message);
  }
}
