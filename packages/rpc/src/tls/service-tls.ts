import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { ConfigError } from "@platform/config";

/**
 * A service's mutual-TLS material: the platform CA, and the certificate it
 * presents both as the server of its internal listener and as the client of
 * its outgoing internal calls. `name` is the certificate's subject CN.
 */
export interface ServiceTls {
  name: string;
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

export const TLS_SETTINGS = ["TLS_CA_FILE", "TLS_CERT_FILE", "TLS_KEY_FILE"] as const;

/**
 * A setting-level mistake, reported at start with the names of the settings:
 * the platform's ConfigError, naming the variable its message starts with.
 */
export class TlsSettingsError extends ConfigError {
  override name = "TlsSettingsError";
  constructor(message: string) {
    super(/^(INTERNAL_TLS|TLS_\w+)/.exec(message)?.[1] ?? "TLS_CA_FILE", message);
  }
}

/** The service name a certificate carries: its subject CN, which its URI SAN (if any) must repeat. */
export function serviceNameOf(cert: X509Certificate): string | undefined {
  const cn = /^CN=([a-z][a-z0-9-]*)$/m.exec(cert.subject)?.[1];
  if (!cn) return undefined;
  const uris = (cert.subjectAltName ?? "")
    .split(", ")
    .filter((s) => s.startsWith("URI:spiffe://"))
    .map((s) => s.slice(4));
  if (uris.length > 0 && !uris.includes(`spiffe://platform/${cn}`)) return undefined;
  return cn;
}

function read(env: NodeJS.ProcessEnv, setting: string): Buffer {
  try {
    return readFileSync(env[setting]!);
  } catch (err) {
    throw new TlsSettingsError(`${setting}: cannot read ${env[setting]}: ${(err as Error).message}`);
  }
}

/**
 * The three files named by TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE, checked
 * together: the certificate must be signed by the CA, match the key, name a
 * service, and (if `expect` is given) name this one.
 */
export function loadServiceTls(env: NodeJS.ProcessEnv, expect?: string): ServiceTls {
  const missing = TLS_SETTINGS.filter((s) => !env[s]);
  if (missing.length > 0) throw new TlsSettingsError(`${missing.join(", ")} must be set (PEM file paths)`);
  const [ca, cert, key] = TLS_SETTINGS.map((s) => read(env, s)) as [Buffer, Buffer, Buffer];
  let caCert: X509Certificate;
  let own: X509Certificate;
  try {
    caCert = new X509Certificate(ca);
    own = new X509Certificate(cert);
  } catch (err) {
    throw new TlsSettingsError(`TLS_CA_FILE or TLS_CERT_FILE is not a PEM certificate: ${(err as Error).message}`);
  }
  if (!own.verify(caCert.publicKey)) throw new TlsSettingsError("TLS_CERT_FILE is not signed by the CA of TLS_CA_FILE");
  let matches = false;
  try {
    matches = own.checkPrivateKey(createPrivateKey(key));
  } catch {}
  if (!matches) throw new TlsSettingsError("TLS_KEY_FILE is not the private key of TLS_CERT_FILE");
  const name = serviceNameOf(own);
  if (!name) throw new TlsSettingsError(`TLS_CERT_FILE names no platform service (subject ${own.subject})`);
  if (expect !== undefined && name !== expect) {
    throw new TlsSettingsError(`TLS_CERT_FILE is the certificate of "${name}", not of "${expect}"`);
  }
  return { name, ca, cert, key };
}

/**
 * What an internal listener or client uses: the service's TLS material, or
 * undefined when INTERNAL_TLS=off says to run without (development and tests
 * only). Secure by default: with neither, this throws a message naming the
 * three settings.
 */
export function internalTlsFromEnv(env: NodeJS.ProcessEnv, expect?: string): ServiceTls | undefined {
  const mode = env.INTERNAL_TLS ?? "";
  if (mode !== "" && mode !== "on" && mode !== "off") {
    throw new TlsSettingsError(`INTERNAL_TLS must be "on" or "off", got ${JSON.stringify(mode)}`);
  }
  if (mode === "off") return undefined;
  if (!TLS_SETTINGS.some((s) => env[s])) {
    throw new TlsSettingsError(
      "internal listeners and calls use mutual TLS: set TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE (PEM file paths), or INTERNAL_TLS=off for development only",
    );
  }
  return loadServiceTls(env, expect);
}
