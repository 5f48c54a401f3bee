import {
  bool,
  ConfigError,
  custom,
  type Env,
  host,
  int,
  internalTlsRows,
  logLevel,
  port,
  raw,
  readSettings,
  replaced,
  text,
  url,
} from "@platform/config";
import { corsAllowedOriginsSetting, metricsTokenSetting, otelEndpointSetting } from "@platform/rpc/settings";

export { ConfigError };

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
  /** OTEL_EXPORTER_OTLP_ENDPOINT: where spans are exported (OTLP/HTTP); unset: none. */
  otelEndpoint?: string;
  /** CORS_ALLOWED_ORIGINS: origins whose pages may call the public port (default none). */
  corsAllowedOrigins?: string[];
  /** METRICS_TOKEN: the bearer token of GET /metrics on both ports; unset: not served. */
  metricsToken?: string;
  /** AGENTS_SECRETS_KEY: seals MCP servers' header values at rest; unset: servers with headers are refused. */
  secretsKey?: Buffer;
  /** AGENTS_MCP_ALLOW_PRIVATE_TARGETS: MCP servers on loopback and private addresses may be called. */
  mcpAllowPrivateTargets?: boolean;
};

const HTTP = ["http:", "https:"] as const;

/** Every setting of the agents service, in the order `--settings` and the README list them. */
export const AGENTS_SETTINGS = {
  agentsHost: replaced("AGENTS_HOST", "HOST", "every service reads HOST"),
  port: port("AGENTS_PORT", {
    default: 8082,
    doc: 'public port: REST + SSE and `/livez` `/healthz` `/readyz` only (gRPC, Connect, gRPC-Web answer 404: the specification says agents "exposes no public gRPC server")',
  }),
  grpcPort: port("AGENTS_GRPC_PORT", {
    default: 50053,
    doc: "internal port: gRPC, Connect, gRPC-Web, gRPC health and reflection, mutual TLS only; `agents.v1.*` answer the `runtime-worker` (tenant workers) and `operator` certificates, every call still with a bearer credential; other services get PERMISSION_DENIED `caller_not_allowed`",
  }),
  ...internalTlsRows({
    files:
      "PEM paths: the platform CA and the agents certificate (CN `agents`), served on `AGENTS_GRPC_PORT` and presented to identity and compute (whose certificates must name them)",
    off: "`off`: plaintext internal port and calls, development and tests only (logged as a warning)",
  }),
  host: host(),
  databaseUrl: url("DATABASE_URL", {
    protocols: ["postgres:", "postgresql:"],
    secret: true,
    doc: "PostgreSQL; unset → embedded PGlite in `AGENTS_DATA_DIR`",
  }),
  dataDir: text("AGENTS_DATA_DIR", { default: ".data/agents", doc: "the embedded database's directory" }),
  identityGrpcUrl: url("IDENTITY_GRPC_URL", { protocols: HTTP, required: true, doc: "e.g. `https://127.0.0.1:50051`" }),
  computeGrpcUrl: url("COMPUTE_GRPC_URL", { protocols: HTTP, required: true, doc: "e.g. `https://127.0.0.1:50052`" }),
  anthropicKey: text("ANTHROPIC_API_KEY", { doc: "enables `anthropic/...`" }),
  anthropicBaseUrl: url("ANTHROPIC_BASE_URL", { protocols: HTTP, doc: "with `ANTHROPIC_API_KEY`: another endpoint" }),
  openaiBaseUrl: url("OPENAI_BASE_URL", {
    protocols: HTTP,
    doc: "enables `openai/...` (so does `OPENAI_API_KEY`); OpenAI, Ollama (`http://host:11434/v1`), vLLM, llama.cpp",
  }),
  openaiKey: text("OPENAI_API_KEY", { doc: "enables `openai/...`; optional with `OPENAI_BASE_URL`" }),
  toolTimeoutMs: int("AGENTS_TOOL_TIMEOUT_MS", { default: 120_000, min: 100, max: 600_000, doc: "per tool call" }),
  toolOutputLimitBytes: int("AGENTS_TOOL_OUTPUT_LIMIT_BYTES", {
    default: 16 * 1024,
    min: 1024,
    max: 1024 * 1024,
    doc: "tool output given to the model",
  }),
  maxModelCalls: int("AGENTS_MAX_MODEL_CALLS", {
    default: 25,
    min: 1,
    max: 1000,
    doc: "model calls per run (each tool round is one)",
  }),
  maxTokens: int("AGENTS_MAX_TOKENS", { default: 4096, min: 1, max: 1_000_000, doc: "`max_tokens` per model call" }),
  runLeaseMs: int("AGENTS_RUN_LEASE_MS", {
    default: 30_000,
    min: 300,
    max: 3_600_000,
    doc: 'a run\'s hold on its session, renewed every third of it: how long a run whose process died can block its session before another replica ends it (see "Crashes and database outages")',
  }),
  sandboxIdleMs: int("AGENTS_SANDBOX_IDLE_MS", {
    default: 15 * 60_000,
    min: 0,
    max: 30 * 24 * 3_600_000,
    shown: "900000 (15 min)",
    doc: "a session idle this long (no run holds it, no message or event) loses its sandbox (compute `DestroySandbox`, which starts compute's grace window for the workspace); `0` keeps sandboxes until the session is deleted",
  }),
  sandboxMaxRuntimeMs: int("AGENTS_SANDBOX_MAX_RUNTIME_MS", {
    min: 1000,
    max: 7 * 24 * 3_600_000,
    shown: "unset (compute's default, 15 min)",
    doc: "the `max_runtime` the sessions' sandboxes are created with (1000 to 7 days); the workspace outlives it: the next tool or file call gets a new sandbox on the same workspace",
  }),
  corsAllowedOrigins: corsAllowedOriginsSetting(
    "origins whose pages may call the public port (comma-separated); none by default: a browser preflight gets 403 `origin_not_allowed` (see `@platform/rpc`)",
  ),
  metricsToken: metricsTokenSetting(),
  secretsKey: custom("AGENTS_SECRETS_KEY", {
    shown: "unset",
    doc: "64 hex characters, a 32-byte AES-256 key sealing the header values of agents' MCP servers at rest (never returned, never echoed); unset: an MCP server with headers is refused (`failed_precondition`), servers without headers work",
    read: (env) => {
      const hex = raw(env, "AGENTS_SECRETS_KEY");
      if (hex === undefined || hex === "") return undefined;
      if (!/^[0-9a-fA-F]{64}$/.test(hex))
        throw new ConfigError("AGENTS_SECRETS_KEY", "AGENTS_SECRETS_KEY must be exactly 64 hex characters (32 bytes)");
      return Buffer.from(hex, "hex");
    },
  }),
  mcpAllowPrivateTargets: bool("AGENTS_MCP_ALLOW_PRIVATE_TARGETS", {
    default: false,
    doc: "agents' MCP servers may be on loopback, private, link-local or other non-public addresses (checked on every request, redirects not followed); off: such a server's tools are unavailable to the run, which the model is told",
  }),
  logLevel: logLevel(),
  otelEndpoint: otelEndpointSetting(),
};

/** Parses the environment; a missing or invalid setting throws ConfigError naming it. */
export function loadConfig(env: Env = process.env): AgentsConfig {
  const s = readSettings(AGENTS_SETTINGS, env);
  return {
    port: s.port,
    grpcPort: s.grpcPort,
    host: s.host,
    databaseUrl: s.databaseUrl,
    dataDir: s.dataDir,
    identityGrpcUrl: s.identityGrpcUrl,
    computeGrpcUrl: s.computeGrpcUrl,
    anthropic: s.anthropicKey ? { apiKey: s.anthropicKey, baseUrl: s.anthropicBaseUrl } : undefined,
    openai: s.openaiBaseUrl || s.openaiKey ? { baseUrl: s.openaiBaseUrl, apiKey: s.openaiKey } : undefined,
    toolTimeoutMs: s.toolTimeoutMs,
    toolOutputLimitBytes: s.toolOutputLimitBytes,
    maxModelCalls: s.maxModelCalls,
    maxTokens: s.maxTokens,
    runLeaseMs: s.runLeaseMs,
    sandboxIdleMs: s.sandboxIdleMs,
    sandboxMaxRuntimeMs: s.sandboxMaxRuntimeMs,
    logLevel: s.logLevel,
    otelEndpoint: s.otelEndpoint,
    corsAllowedOrigins: s.corsAllowedOrigins,
    metricsToken: s.metricsToken,
    secretsKey: s.secretsKey,
    mcpAllowPrivateTargets: s.mcpAllowPrivateTargets,
  };
}
