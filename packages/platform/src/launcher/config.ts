import { resolve } from "node:path";

/**
 * When a crashed service is started again, and when the launcher stops
 * trying. The n-th crash in a row waits min(maxDelayMs, initialDelayMs *
 * 2^(n-1)) before the restart; a service that has answered for healthyAfterMs
 * since its last start starts the row again; maxCrashes crashes of one service
 * within windowMs stop the whole platform (exit 1).
 */
export type RestartPolicy = {
  initialDelayMs: number;
  maxDelayMs: number;
  healthyAfterMs: number;
  maxCrashes: number;
  windowMs: number;
};

/** Console verbosity: services' lines at this pino level or above are shown; the files under logs/ get everything the services log. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** Ports of the embedded shape; each can be moved with its environment variable. */
export type LauncherConfig = {
  dataDir: string;
  host: string;
  ports: {
    identityRest: number;
    identityGrpc: number;
    compute: number;
    agents: number;
    agentsGrpc: number;
    router: number;
  };
  ownerEmail: string;
  ownerOrg: string;
  restart: RestartPolicy;
  log: { level: LogLevel; maxFileBytes: number };
};

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535)
    throw new Error(`${name} must be a port number (1-65535), got ${JSON.stringify(raw)}`);
  return n;
}

function count(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min)
    throw new Error(`${name} must be a whole number of at least ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

const levels: readonly LogLevel[] = ["debug", "info", "warn", "error"];

function logLevel(env: NodeJS.ProcessEnv, argv: readonly string[]): LogLevel {
  if (argv.includes("--verbose")) return "debug";
  const raw = env.PLATFORM_LOG_LEVEL;
  // PLATFORM_VERBOSE was the old, undocumented switch for the same.
  if ((raw === undefined || raw === "") && env.PLATFORM_VERBOSE) return "debug";
  if (raw === undefined || raw === "") return "warn";
  if (!levels.includes(raw as LogLevel))
    throw new Error(`PLATFORM_LOG_LEVEL must be one of ${levels.join(", ")}, got ${JSON.stringify(raw)}`);
  return raw as LogLevel;
}

/** The launcher's settings from the environment and its arguments (`--verbose` only). */
export function loadLauncherConfig(env: NodeJS.ProcessEnv = process.env, argv: readonly string[] = []): LauncherConfig {
  const unknown = argv.filter((a) => a !== "--verbose");
  if (unknown.length > 0)
    throw new Error(
      `unknown argument ${JSON.stringify(unknown[0])} (the launcher takes --verbose only; settings are environment variables, see the README)`,
    );
  return {
    dataDir: resolve(env.PLATFORM_DATA_DIR ?? ".data"),
    host: env.PLATFORM_HOST ?? "127.0.0.1",
    ports: {
      identityRest: port(env, "PLATFORM_IDENTITY_PORT", 8081),
      identityGrpc: port(env, "PLATFORM_IDENTITY_GRPC_PORT", 50051),
      compute: port(env, "PLATFORM_COMPUTE_PORT", 50052),
      agents: port(env, "PLATFORM_AGENTS_PORT", 8082),
      agentsGrpc: port(env, "PLATFORM_AGENTS_GRPC_PORT", 50053),
      router: port(env, "PLATFORM_ROUTER_PORT", 8080),
    },
    ownerEmail: env.PLATFORM_OWNER_EMAIL ?? "owner@example.com",
    ownerOrg: env.PLATFORM_OWNER_ORG ?? "My Org",
    restart: {
      initialDelayMs: count(env, "PLATFORM_RESTART_DELAY_MS", 500, 0),
      maxDelayMs: count(env, "PLATFORM_RESTART_MAX_DELAY_MS", 30_000, 0),
      healthyAfterMs: count(env, "PLATFORM_RESTART_HEALTHY_MS", 60_000, 0),
      maxCrashes: count(env, "PLATFORM_RESTART_MAX_CRASHES", 5, 1),
      windowMs: count(env, "PLATFORM_RESTART_WINDOW_MS", 600_000, 1),
    },
    log: { level: logLevel(env, argv), maxFileBytes: count(env, "PLATFORM_LOG_MAX_BYTES", 10 * 1024 * 1024, 4096) },
  };
}
