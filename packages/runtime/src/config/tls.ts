import { ConfigError, checkUrl, custom, type Env, raw } from "@platform/config";
import { internalTlsFromEnv, type ServiceTls } from "@platform/rpc/settings";

export type { ServiceTls };

/**
 * The service's certificate from TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE,
 * which must name `name`; undefined with INTERNAL_TLS=off. A missing or
 * unusable setting is a ConfigError naming it (main exits 2).
 */
export function internalTls(env: Env, name: string): ServiceTls | undefined {
  return internalTlsFromEnv(env, name);
}

/** The TLS_* row of a runtime process, read as internalTls does. */
export function internalTlsSetting(name: string) {
  return custom(["TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE", "INTERNAL_TLS"], {
    shown: "required",
    doc: `PEM paths: the platform CA and its \`${name}\` certificate (see "Mutual TLS"); \`INTERNAL_TLS=off\` (development and tests only, logged as a warning): none, \`http://\` URLs`,
    read: (env) => internalTls(env, name),
  });
}

/**
 * An internal service's base URL: https:// when this service uses mutual TLS (`tls`)
 * (a plaintext call would carry tenant credentials unauthenticated), http://
 * with INTERNAL_TLS=off.
 */
export function internalUrl(env: Env, key: string, tls: boolean): string {
  const v = raw(env, key);
  if (v === undefined) throw new ConfigError(key, `${key} is required`);
  checkUrl(key, v, { protocols: ["http:", "https:"] });
  const scheme = new URL(v).protocol;
  if (tls && scheme !== "https:")
    throw new ConfigError(key, `${key} must be an https:// URL (internal calls use mutual TLS), got "${v}"`);
  if (!tls && scheme !== "http:")
    throw new ConfigError(key, `${key} must be an http:// URL with INTERNAL_TLS=off, got "${v}"`);
  return v.replace(/\/+$/, "");
}

/** A row for an internal URL: https:// with mutual TLS, http:// with INTERNAL_TLS=off. */
export function internalUrlSetting(key: string, doc: string) {
  return custom(key, {
    shown: "required",
    doc,
    // INTERNAL_TLS was checked by the TLS row read before this one.
    read: (env) => internalUrl(env, key, env.INTERNAL_TLS !== "off"),
  });
}
