import { internalTlsFromEnv, type ServiceTls, TlsSettingsError } from "@platform/rpc";
import { ConfigError, type Env, url } from "./env.ts";

export type { ServiceTls };

/**
 * The service's certificate from TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE,
 * which must name `name`; undefined with INTERNAL_TLS=off. A missing or
 * unusable setting is a ConfigError naming it (main exits 2).
 */
export function internalTls(env: Env, name: string): ServiceTls | undefined {
  try {
    return internalTlsFromEnv(env, name);
  } catch (err) {
    if (err instanceof TlsSettingsError) throw new ConfigError(err.message);
    throw err;
  }
}

/**
 * An internal service's base URL: https:// when this service uses mutual TLS
 * (a plaintext call would carry tenant credentials unauthenticated), http://
 * with INTERNAL_TLS=off.
 */
export function internalUrl(env: Env, key: string, tls: ServiceTls | undefined): string {
  const v = url(env, key);
  const scheme = new URL(v).protocol;
  if (tls && scheme !== "https:")
    throw new ConfigError(`${key} must be an https:// URL (internal calls use mutual TLS), got "${v}"`);
  if (!tls && scheme !== "http:")
    throw new ConfigError(`${key} must be an http:// URL with INTERNAL_TLS=off, got "${v}"`);
  return v;
}
