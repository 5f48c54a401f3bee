import { CORS_SETTING, parseAllowedOrigins } from "@platform/rpc";
/** The agents service's settings, read once from the environment at start-up. */
export type AgentsConfig = {
  /** The public port: REST/SSE only. */
  port: number;
  /** The internal port: gRPC, Connect, gRPC-Web over mutual TLS (the runtime's tenant workers). */
  grpcPort: number;
  host: string;
  /** postgres:// URL; absent → embedded PGlite under dataDir. */
  databaseUrl?: string;
  dataDir: string;
  identityGrpcUrl: string;
  computeGrpcUrl: string;
  anthropic?: { apiKey: string; baseUrl?: string };
  openai?: { baseUrl?: string; apiKey?: string };
  toolTimeoutMs: number;
  toolOutputLimitBytes: number;
  maxModelCalls: number;
  maxTokens: number;
  runLeaseMs: number;
  /** A session idle this long loses its sandbox (DestroySandbox); 0 or absent keeps sandboxes. */
  sandboxIdleMs?: number;
  /**
   * AGENTS_SANDBOX_MAX_RUNTIME_MS: the max_runtime the sessions' sandboxes
   * are created with; absent: compute's default (15 minutes). The workspace
   * outlives it: the next tool or file call gets a new sandbox on it.
   */
  sandboxMaxRuntimeMs?: number;
  logLevel: string;
  /** CORS_ALLOWED_ORIGINS: origins whose pages may call the public port (default none). */
  corsAllowedOrigins?: string[];
};

export class ConfigError extends Error {
  override name = "ConfigError";
}

/** Parses the environment; a missing or invalid setting throws ConfigError naming it. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): AgentsConfig {
  const str = (name: string) => {
    const v = env[name]?.trim();
    return v ? v : undefined;
  };
  const required = (name: string) => {
    const v = str(name);
    if (!v) throw new ConfigError(`${name} is required`);
    return v;
  };
  const int = (name: string, fallback: number, min: number, max: number) => {
    const v = str(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got "${v}"`);
    return n;
  };
  const url = (name: string, value: string | undefined) => {
    if (value === undefined) return undefined;
    try {
      const u = new URL(value);
      if (!/^https?:$/.test(u.protocol) && !/^postgres(ql)?:$/.test(u.protocol)) throw new Error();
    } catch {
      throw new ConfigError(`${name} must be a URL, got "${value}"`);
    }
    return value;
  };
  if (str("AGENTS_HOST")) throw new ConfigError("AGENTS_HOST was replaced by HOST (every service reads HOST)");
  const level = str("LOG_LEVEL") ?? "info";
  if (!["trace", "debug", "info", "warn", "error", "fatal", "silent"].includes(level)) {
    throw new ConfigError(`LOG_LEVEL must be debug, info, warn or error, got "${level}"`);
  }
  const anthropicKey = str("ANTHROPIC_API_KEY");
  const openaiBase = url("OPENAI_BASE_URL", str("OPENAI_BASE_URL"));
  const openaiKey = str("OPENAI_API_KEY");
  return {
    port: int("AGENTS_PORT", 8082, 0, 65535),
    grpcPort: int("AGENTS_GRPC_PORT", 50053, 0, 65535),
    host: str("HOST") ?? "127.0.0.1",
    databaseUrl: url("DATABASE_URL", str("DATABASE_URL")),
    dataDir: str("AGENTS_DATA_DIR") ?? ".data/agents",
    identityGrpcUrl: url("IDENTITY_GRPC_URL", required("IDENTITY_GRPC_URL"))!,
    computeGrpcUrl: url("COMPUTE_GRPC_URL", required("COMPUTE_GRPC_URL"))!,
    anthropic: anthropicKey
      ? { apiKey: anthropicKey, baseUrl: url("ANTHROPIC_BASE_URL", str("ANTHROPIC_BASE_URL")) }
      : undefined,
    openai: openaiBase || openaiKey ? { baseUrl: openaiBase, apiKey: openaiKey } : undefined,
    toolTimeoutMs: int("AGENTS_TOOL_TIMEOUT_MS", 120_000, 100, 600_000),
    toolOutputLimitBytes: int("AGENTS_TOOL_OUTPUT_LIMIT_BYTES", 16 * 1024, 1024, 1024 * 1024),
    maxModelCalls: int("AGENTS_MAX_MODEL_CALLS", 25, 1, 1000),
    maxTokens: int("AGENTS_MAX_TOKENS", 4096, 1, 1_000_000),
    runLeaseMs: int("AGENTS_RUN_LEASE_MS", 30_000, 300, 3_600_000),
    sandboxIdleMs: int("AGENTS_SANDBOX_IDLE_MS", 15 * 60_000, 0, 30 * 24 * 3_600_000),
    sandboxMaxRuntimeMs:
      str("AGENTS_SANDBOX_MAX_RUNTIME_MS") === undefined
        ? undefined
        : int("AGENTS_SANDBOX_MAX_RUNTIME_MS", 0, 1000, 7 * 24 * 3_600_000),
    logLevel: level,
    corsAllowedOrigins: corsOrigins(env),
  };
}

function corsOrigins(env: NodeJS.ProcessEnv): string[] {
  try {
    return parseAllowedOrigins(env[CORS_SETTING]);
  } catch (e) {
    throw new ConfigError((e as Error).message);
  }
}
