import { CORS_SETTING, parseAllowedOrigins } from "@platform/rpc";
import type { RotationPolicy } from "../keys/signing-keys.ts";
import { MAX_TTL_SECONDS } from "../tokens/jwt-service.ts";
import { parseDuration } from "./duration.ts";

/** A setting that is missing or invalid; the process exits naming it. */
export class SettingsError extends Error {
  override name = "SettingsError";
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`);
  }
}

export type DeploymentEnv = "dev" | "staging" | "prod";
export type LogLevel = "debug" | "info" | "warn" | "error";

export type Argon2Settings = {
  memoryKiB: number;
  timeCost: number;
  parallelism: number;
  maxConcurrent: number;
  /** Hashes waiting for a slot beyond which a caller gets 503 at once (ARGON2_MAX_QUEUE). */
  maxQueue?: number;
};

/**
 * OWASP password storage cheat sheet minimum for argon2id: m=19 MiB, t=2,
 * p=1. Two hashes at once: each is single-threaded and CPU-bound, so more
 * than the cores in flight only adds memory (19 MiB each), not throughput.
 */
export const ARGON2_DEFAULTS = {
  memoryKiB: 19_456,
  timeCost: 2,
  parallelism: 1,
  maxConcurrent: 2,
  maxQueue: 32,
} satisfies Argon2Settings;

/**
 * Login throttling (LOGIN_THROTTLE_*): per account (lower(email)) and per
 * client address, failures beyond the free ones back off exponentially.
 */
export type LoginThrottleSettings = {
  accountFreeFailures: number;
  addressFreeFailures: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Failures are forgotten after this long without a new one. */
  windowMs: number;
  /** Entries kept per kind (accounts, addresses); the least recently used go first. */
  maxEntries: number;
  /** Proxies in front whose X-Forwarded-For entries are trusted (0: use the socket's address). */
  trustedProxyHops: number;
};

export const LOGIN_THROTTLE_DEFAULTS: LoginThrottleSettings = {
  accountFreeFailures: 5,
  addressFreeFailures: 100,
  baseDelayMs: 1000,
  maxDelayMs: 15 * 60_000,
  windowMs: 15 * 60_000,
  maxEntries: 100_000,
  trustedProxyHops: 0,
};

export type Bootstrap = { email: string; password: string; name: string; orgName: string; orgSlug?: string };

/** Every row of the identity Limits table, plus the few settings this implementation adds. */
export type Settings = {
  /** Pooled server connection. Absent: embedded PGlite under `dataDir` (design.md's one-machine shape). */
  databaseUrl?: string;
  /** Direct connection used by the migrator only; falls back to databaseUrl. */
  migrationDbUrl?: string;
  /** PGlite directory when databaseUrl is absent; absent too: in memory. */
  dataDir?: string;
  /** 32-byte AES-256 key encrypting signing keys at rest. */
  kek: Buffer;
  host: string;
  serverPort: number;
  grpcPort: number;
  env: DeploymentEnv;
  jwtTtlSeconds: number;
  refreshTokenTtlSeconds: number;
  requestTimeoutMs: number;
  readHeaderTimeoutMs: number;
  shutdownTimeoutMs: number;
  bodyLimitBytes: number;
  dbMaxConns: number;
  dbMinConns: number;
  dbMaxConnLifetimeMs: number;
  logLevel: LogLevel;
  otelEndpoint?: string;
  argon2: Argon2Settings;
  loginThrottle: LoginThrottleSettings;
  bootstrap?: Bootstrap;
  /** IDENTITY_SIGNUP=open: anyone may sign up (POST /v1/auth/signup). Default closed. */
  signupOpen: boolean;
  /** INVITATION_TTL: how long an invitation token stays valid (default 7 days). */
  invitationTtlSeconds: number;
  /** IDENTITY_PUBLIC_URL: identity's REST base as outside verifiers reach it (discovery's jwks_uri); default: the request's Host. */
  publicUrl?: string;
  /** CORS_ALLOWED_ORIGINS: origins whose pages may call the REST port (default none). */
  corsAllowedOrigins: string[];
  /** IDENTITY_KEY_ROTATION_INTERVAL, IDENTITY_KEY_PREPUBLISH, IDENTITY_KEY_RETENTION (keyRotationSettings). */
  keyRotation: RotationPolicy;
};

/** Scheduled signing-key rotation: a new key every 30 days (720h), published an hour before it signs. */
export const KEY_ROTATION_DEFAULTS = { intervalMs: 720 * 3_600_000, prePublishMs: 3_600_000 };

/**
 * IDENTITY_KEY_ROTATION_INTERVAL ("off" disables the schedule; identity
 * rotate-keys still works), IDENTITY_KEY_PREPUBLISH (longer than any outside
 * verifier caches the key set: our Cache-Control says 5 minutes, jose
 * refetches an unknown kid after 30 s) and IDENTITY_KEY_RETENTION (default:
 * the longest token lifetime, max(JWT_TTL, IssueJWT's 24 h ceiling), plus a
 * minute for a replica that has not yet heard of the switch; never below JWT_TTL).
 */
function keyRotationSettings(env: Env, jwtTtlSeconds: number): RotationPolicy {
  const rawInterval = read(env, "IDENTITY_KEY_ROTATION_INTERVAL");
  const intervalMs =
    rawInterval === "off"
      ? undefined
      : duration(env, "IDENTITY_KEY_ROTATION_INTERVAL", KEY_ROTATION_DEFAULTS.intervalMs, 1000);
  const prePublishMs = duration(env, "IDENTITY_KEY_PREPUBLISH", KEY_ROTATION_DEFAULTS.prePublishMs, 1000);
  if (intervalMs !== undefined && prePublishMs >= intervalMs)
    throw new SettingsError("IDENTITY_KEY_PREPUBLISH", "must be shorter than IDENTITY_KEY_ROTATION_INTERVAL");
  const retentionMs = duration(
    env,
    "IDENTITY_KEY_RETENTION",
    Math.max(jwtTtlSeconds, MAX_TTL_SECONDS) * 1000 + 60_000,
    1000,
  );
  if (retentionMs < jwtTtlSeconds * 1000)
    throw new SettingsError(
      "IDENTITY_KEY_RETENTION",
      "must be at least JWT_TTL (tokens signed last would be refused before they expire)",
    );
  return { intervalMs, prePublishMs, retentionMs };
}

type Env = Record<string, string | undefined>;

function read(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === "" ? undefined : v.trim();
}

function corsOrigins(env: Env): string[] {
  try {
    return parseAllowedOrigins(env[CORS_SETTING]);
  } catch (e) {
    throw new SettingsError(CORS_SETTING, (e as Error).message.replace(`${CORS_SETTING}: `, ""));
  }
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new SettingsError(name, `must be an integer, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || n > max) throw new SettingsError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function duration(env: Env, name: string, fallbackMs: number, minMs = 1): number {
  const raw = read(env, name);
  if (raw === undefined) return fallbackMs;
  const ms = parseDuration(raw);
  if (ms === undefined)
    throw new SettingsError(name, `must be a duration such as 30s, 5m or 1h, got ${JSON.stringify(raw)}`);
  if (ms < minMs) throw new SettingsError(name, `must be at least ${minMs} ms`);
  return ms;
}

function oneOf<T extends string>(env: Env, name: string, values: readonly T[], fallback: T): T {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!(values as readonly string[]).includes(raw))
    throw new SettingsError(name, `must be one of ${values.join(", ")}, got ${JSON.stringify(raw)}`);
  return raw as T;
}

function url(env: Env, name: string): string | undefined {
  const raw = read(env, name);
  if (raw === undefined) return undefined;
  try {
    new URL(raw);
  } catch {
    throw new SettingsError(name, "must be a URL");
  }
  return raw;
}

function postgresUrl(env: Env, name: string): string | undefined {
  const raw = url(env, name);
  if (raw !== undefined && !/^postgres(ql)?:$/.test(new URL(raw).protocol)) {
    throw new SettingsError(name, "must be a postgres:// URL");
  }
  return raw;
}

/**
 * Reads and validates every setting once, at start-up. Throws SettingsError
 * naming the first missing or invalid one. Secrets never appear in messages.
 */
export function loadSettings(env: Env = process.env): Settings {
  const kekHex = read(env, "IDENTITY_AUTHKEY_KEK");
  if (kekHex === undefined)
    throw new SettingsError("IDENTITY_AUTHKEY_KEK", "is required (64 hex characters, a 32-byte AES-256 key)");
  if (!/^[0-9a-fA-F]{64}$/.test(kekHex))
    throw new SettingsError("IDENTITY_AUTHKEY_KEK", "must be exactly 64 hex characters (a 32-byte AES-256 key)");

  const databaseUrl = postgresUrl(env, "DATABASE_URL");
  const dataDir = read(env, "IDENTITY_DATA_DIR");
  // The spec makes DATABASE_URL required (cluster shape). The embedded shape
  // of design.md runs on PGlite instead, so its absence is accepted only when
  // IDENTITY_DATA_DIR says where the embedded database lives, or when
  // IDENTITY_EMBEDDED_MEMORY=1 asks for a throw-away in-memory one.
  if (!databaseUrl && !dataDir && read(env, "IDENTITY_EMBEDDED_MEMORY") !== "1") {
    throw new SettingsError("DATABASE_URL", "is required (or set IDENTITY_DATA_DIR for the embedded PGlite database)");
  }

  const dbMaxConns = int(env, "DB_MAX_CONNS", 20, 1, 10_000);
  const dbMinConns = int(env, "DB_MIN_CONNS", 2, 0, 10_000);
  if (dbMinConns > dbMaxConns) throw new SettingsError("DB_MIN_CONNS", `must not exceed DB_MAX_CONNS (${dbMaxConns})`);

  const bootstrapEmail = read(env, "BOOTSTRAP_OWNER_EMAIL");
  let bootstrap: Bootstrap | undefined;
  if (bootstrapEmail !== undefined) {
    const password = env.BOOTSTRAP_OWNER_PASSWORD ?? "";
    if (password.length < 8)
      throw new SettingsError(
        "BOOTSTRAP_OWNER_PASSWORD",
        "is required with BOOTSTRAP_OWNER_EMAIL (at least 8 characters)",
      );
    const orgName = read(env, "BOOTSTRAP_ORG_NAME");
    if (orgName === undefined) throw new SettingsError("BOOTSTRAP_ORG_NAME", "is required with BOOTSTRAP_OWNER_EMAIL");
    if (!/^[^\s@]+@[^\s@]+$/.test(bootstrapEmail))
      throw new SettingsError("BOOTSTRAP_OWNER_EMAIL", "must be an email address");
    bootstrap = {
      email: bootstrapEmail,
      password,
      name: read(env, "BOOTSTRAP_OWNER_NAME") ?? "Owner",
      orgName,
      orgSlug: read(env, "BOOTSTRAP_ORG_SLUG"),
    };
  }

  const jwtTtlSeconds = Math.floor(duration(env, "JWT_TTL", 3_600_000, 1000) / 1000);
  return {
    databaseUrl,
    migrationDbUrl: postgresUrl(env, "MIGRATION_DB_URL"),
    dataDir,
    kek: Buffer.from(kekHex, "hex"),
    host: read(env, "HOST") ?? "127.0.0.1",
    serverPort: int(env, "SERVER_PORT", 8081, 0, 65535),
    grpcPort: int(env, "IDENTITY_GRPC_PORT", 50051, 0, 65535),
    env: oneOf(env, "ENV", ["dev", "staging", "prod"] as const, "dev"),
    jwtTtlSeconds,
    refreshTokenTtlSeconds: Math.floor(duration(env, "REFRESH_TOKEN_TTL", 30 * 24 * 3_600_000, 1000) / 1000),
    requestTimeoutMs: duration(env, "REQUEST_TIMEOUT", 30_000),
    readHeaderTimeoutMs: duration(env, "READ_HEADER_TIMEOUT", 5_000),
    shutdownTimeoutMs: duration(env, "SHUTDOWN_TIMEOUT", 30_000),
    bodyLimitBytes: int(env, "BODY_LIMIT_BYTES", 1_048_576, 1, 1 << 30),
    dbMaxConns,
    dbMinConns,
    dbMaxConnLifetimeMs: duration(env, "DB_MAX_CONN_LIFETIME", 30 * 60_000),
    logLevel: oneOf(env, "LOG_LEVEL", ["debug", "info", "warn", "error"] as const, "info"),
    otelEndpoint: url(env, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    argon2: {
      memoryKiB: int(env, "ARGON2_MEMORY_KIB", ARGON2_DEFAULTS.memoryKiB, 8, 4_194_304),
      timeCost: int(env, "ARGON2_TIME_COST", ARGON2_DEFAULTS.timeCost, 1, 100),
      parallelism: int(env, "ARGON2_PARALLELISM", ARGON2_DEFAULTS.parallelism, 1, 64),
      maxConcurrent: int(env, "ARGON2_MAX_CONCURRENT", ARGON2_DEFAULTS.maxConcurrent, 1, 1024),
      maxQueue: int(env, "ARGON2_MAX_QUEUE", ARGON2_DEFAULTS.maxQueue, 0, 100_000),
    },
    loginThrottle: {
      accountFreeFailures: int(
        env,
        "LOGIN_THROTTLE_ACCOUNT_FAILURES",
        LOGIN_THROTTLE_DEFAULTS.accountFreeFailures,
        1,
        1_000_000,
      ),
      addressFreeFailures: int(
        env,
        "LOGIN_THROTTLE_ADDRESS_FAILURES",
        LOGIN_THROTTLE_DEFAULTS.addressFreeFailures,
        1,
        1_000_000,
      ),
      baseDelayMs: duration(env, "LOGIN_THROTTLE_BASE_DELAY", LOGIN_THROTTLE_DEFAULTS.baseDelayMs),
      maxDelayMs: duration(env, "LOGIN_THROTTLE_MAX_DELAY", LOGIN_THROTTLE_DEFAULTS.maxDelayMs),
      windowMs: duration(env, "LOGIN_THROTTLE_WINDOW", LOGIN_THROTTLE_DEFAULTS.windowMs),
      maxEntries: int(env, "LOGIN_THROTTLE_MAX_ENTRIES", LOGIN_THROTTLE_DEFAULTS.maxEntries, 1, 10_000_000),
      trustedProxyHops: int(env, "LOGIN_TRUSTED_PROXY_HOPS", LOGIN_THROTTLE_DEFAULTS.trustedProxyHops, 0, 16),
    },
    bootstrap,
    signupOpen: oneOf(env, "IDENTITY_SIGNUP", ["closed", "open"] as const, "closed") === "open",
    invitationTtlSeconds: Math.floor(duration(env, "INVITATION_TTL", 7 * 24 * 3_600_000, 60_000) / 1000),
    publicUrl: url(env, "IDENTITY_PUBLIC_URL")?.replace(/\/+$/, ""),
    corsAllowedOrigins: corsOrigins(env),
    keyRotation: keyRotationSettings(env, jwtTtlSeconds),
  };
}
