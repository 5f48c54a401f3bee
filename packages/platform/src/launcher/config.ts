import { resolve } from "node:path";
import { custom, type Env, int, oneOf, port, raw, readSettings, text, url } from "@platform/config";

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
    /** The e2b service (E2B's API for the e2b SDK); 0: not started. */
    e2b: number;
  };
  ownerEmail: string;
  ownerOrg: string;
  restart: RestartPolicy;
  log: { level: LogLevel; maxFileBytes: number };
  /** OTEL_EXPORTER_OTLP_ENDPOINT, given to every service (and by the router to its workers); unset: no traces. */
  otelEndpoint?: string;
};

const LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];
const portOf = (name: string, fallback: number, what: string) =>
  port(name, { default: fallback, min: 1, doc: `${what} (the service's own port setting is set from it)` });
const count = (name: string, fallback: number, min: number, doc: string) => int(name, { default: fallback, min, doc });

/** Every setting of the launcher (`platform` with no command, or `bash scripts/run.sh`), in listing order. */
export const LAUNCHER_SETTINGS = {
  dataDir: text("PLATFORM_DATA_DIR", {
    default: ".data",
    doc: "everything the platform keeps: databases, workspaces, worker state, secrets, certificates, logs",
  }),
  host: text("PLATFORM_HOST", {
    default: "127.0.0.1",
    doc: "every service listens on this address only (each child's `HOST`); nothing is reachable from another machine unless set",
  }),
  identityRest: portOf("PLATFORM_IDENTITY_PORT", 8081, "identity's REST port"),
  identityGrpc: portOf("PLATFORM_IDENTITY_GRPC_PORT", 50051, "identity's gRPC port"),
  compute: portOf("PLATFORM_COMPUTE_PORT", 50052, "compute's gRPC port"),
  agents: portOf("PLATFORM_AGENTS_PORT", 8082, "agents' REST port"),
  agentsGrpc: portOf("PLATFORM_AGENTS_GRPC_PORT", 50053, "agents' internal gRPC port"),
  router: portOf("PLATFORM_ROUTER_PORT", 8080, "the runtime router's port"),
  e2b: int("PLATFORM_E2B_PORT", {
    default: 0,
    min: 0,
    max: 65535,
    doc: "the e2b service's port: E2B's API over compute, so the unchanged e2b SDK runs on the platform's sandboxes (`E2B_API_URL` and `E2B_SANDBOX_URL` = `http://<host>:<port>`, `E2B_API_KEY` = a platform API key; `packages/e2b-compat`); 0: not started",
  }),
  ownerEmail: text("PLATFORM_OWNER_EMAIL", {
    default: "owner@example.com",
    doc: "the first owner, made on the first start",
  }),
  ownerOrg: text("PLATFORM_OWNER_ORG", { default: "My Org", doc: "the first owner's organization" }),
  initialDelayMs: count(
    "PLATFORM_RESTART_DELAY_MS",
    500,
    0,
    "wait before restarting a crashed service, doubling per crash in a row",
  ),
  maxDelayMs: count("PLATFORM_RESTART_MAX_DELAY_MS", 30_000, 0, "longest wait before a restart"),
  healthyAfterMs: count("PLATFORM_RESTART_HEALTHY_MS", 60_000, 0, "a service up this long starts its crash row again"),
  maxCrashes: count(
    "PLATFORM_RESTART_MAX_CRASHES",
    5,
    1,
    "crashes of one service within the window that stop the platform (exit 1)",
  ),
  windowMs: count("PLATFORM_RESTART_WINDOW_MS", 600_000, 1, "the window of `PLATFORM_RESTART_MAX_CRASHES`"),
  logLevel: oneOf("PLATFORM_LOG_LEVEL", LEVELS, {
    default: "warn",
    doc: "what the console shows of the services' lines: error, warn, info or debug (`--verbose`: debug); the files under `logs/` get info and up, debug too at debug",
  }),
  // PLATFORM_VERBOSE was the old, undocumented switch for the same; kept working, not listed.
  verbose: {
    ...custom("PLATFORM_VERBOSE", { shown: "", doc: "", read: (env: Env) => Boolean(env.PLATFORM_VERBOSE) }),
    hidden: true,
  },
  maxFileBytes: count("PLATFORM_LOG_MAX_BYTES", 10 * 1024 * 1024, 4096, "a log file this large becomes `<name>.log.1`"),
  otelEndpoint: url("OTEL_EXPORTER_OTLP_ENDPOINT", {
    protocols: ["http:", "https:"],
    doc: "OTLP/HTTP base URL (e.g. `http://127.0.0.1:4318`) every service exports its traces to, passed on to each (and by the router to its tenant workers); unset: no trace export",
  }),
};

/** The launcher's settings from the environment and its arguments (`--verbose` only). */
export function loadLauncherConfig(env: NodeJS.ProcessEnv = process.env, argv: readonly string[] = []): LauncherConfig {
  const unknown = argv.filter((a) => a !== "--verbose");
  if (unknown.length > 0)
    throw new Error(
      `unknown argument ${JSON.stringify(unknown[0])} (the launcher takes --verbose only; settings are environment variables, see the README)`,
    );
  const s = readSettings(LAUNCHER_SETTINGS, env);
  const levelSet = raw(env, "PLATFORM_LOG_LEVEL") !== undefined;
  return {
    dataDir: resolve(s.dataDir),
    host: s.host,
    ports: {
      identityRest: s.identityRest,
      identityGrpc: s.identityGrpc,
      compute: s.compute,
      agents: s.agents,
      agentsGrpc: s.agentsGrpc,
      router: s.router,
      e2b: s.e2b,
    },
    ownerEmail: s.ownerEmail,
    ownerOrg: s.ownerOrg,
    restart: {
      initialDelayMs: s.initialDelayMs,
      maxDelayMs: s.maxDelayMs,
      healthyAfterMs: s.healthyAfterMs,
      maxCrashes: s.maxCrashes,
      windowMs: s.windowMs,
    },
    log: {
      level: argv.includes("--verbose") || (!levelSet && s.verbose) ? "debug" : s.logLevel,
      maxFileBytes: s.maxFileBytes,
    },
    otelEndpoint: s.otelEndpoint,
  };
}
