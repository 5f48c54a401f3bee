import { isUuid } from "@platform/errors";

/** A setting that is missing or invalid; main() prints it and exits. */
export class ConfigError extends Error {
  override name = "ConfigError";
}

export type Env = Record<string, string | undefined>;

export function required(env: Env, key: string): string {
  const v = env[key]?.trim();
  if (!v) throw new ConfigError(`${key} is required`);
  return v;
}

export function port(env: Env, key: string, fallback: number): number {
  const raw = env[key]?.trim();
  if (!raw) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new ConfigError(`${key} must be a port number (0-65535), got "${raw}"`);
  return n;
}

export function url(env: Env, key: string): string {
  const v = required(env, key);
  try {
    const u = new URL(v);
    if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error();
  } catch {
    throw new ConfigError(`${key} must be an http(s) URL, got "${v}"`);
  }
  return v.replace(/\/+$/, "");
}

const LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"];
export function logLevel(env: Env): string {
  const v = env.LOG_LEVEL?.trim() || "info";
  if (!LEVELS.includes(v)) throw new ConfigError(`LOG_LEVEL must be one of ${LEVELS.join(", ")}, got "${v}"`);
  return v;
}

export function uuid(env: Env, key: string): string {
  const v = required(env, key);
  if (!isUuid(v)) throw new ConfigError(`${key} must be a UUID, got "${v}"`);
  return v.toLowerCase();
}
