// The PKI the launcher keeps under its data directory: ca.crt/ca.key and
// <name>.crt/<name>.key per service, made on first start and reused after.
import { createPrivateKey, X509Certificate } from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { createCa, type IssueOptions, issueServiceCert, type PemPair } from "./certificates.ts";
import { type ServiceTlsFiles, serviceTlsFiles } from "./files.ts";

/** Every identity on the platform's internal network. `operator` is the person at the console (buf curl). */
export const SERVICE_NAMES = [
  "identity",
  "compute",
  "agents",
  "runtime-router",
  "runtime-worker",
  "e2b",
  "operator",
] as const;
export type ServiceName = (typeof SERVICE_NAMES)[number];

export { type ServiceTlsFiles, serviceTlsFiles } from "./files.ts";

/** The settings every service reads its certificate from. */
export function tlsEnv(files: ServiceTlsFiles): Record<"TLS_CA_FILE" | "TLS_CERT_FILE" | "TLS_KEY_FILE", string> {
  return { TLS_CA_FILE: files.caFile, TLS_CERT_FILE: files.certFile, TLS_KEY_FILE: files.keyFile };
}

export interface EnsureOptions {
  names?: readonly string[];
  /** Server names every certificate must carry besides localhost and 127.0.0.1 (e.g. PLATFORM_HOST). */
  hosts?: readonly string[];
  /** A certificate that ends sooner than this is issued anew; default 7 days. */
  renewBeforeMs?: number;
  now?: Date;
}

export interface EnsureResult {
  dir: string;
  /** Names whose certificate was (re-)issued on this call; "ca" when the CA was made. */
  issued: string[];
  files(name: string): ServiceTlsFiles;
}

const isIp = (h: string) => /^[\d.]+$/.test(h) || h.includes(":");

function serverNames(hosts: readonly string[]): Required<Pick<IssueOptions, "dnsNames" | "ipAddresses">> {
  const all = new Set([
    "localhost",
    "127.0.0.1",
    "::1",
    ...hosts.filter((h) => h !== "" && h !== "0.0.0.0" && h !== "::"),
  ]);
  return { dnsNames: [...all].filter((h) => !isIp(h)), ipAddresses: [...all].filter(isIp) };
}

function readPair(certPath: string, keyPath: string): PemPair | undefined {
  try {
    return { cert: fs.readFileSync(certPath, "utf8"), key: fs.readFileSync(keyPath, "utf8") };
  } catch {
    return undefined;
  }
}

function writePair(certPath: string, keyPath: string, pair: PemPair) {
  // Key first, each through a temporary name: a crash never leaves a
  // certificate beside a key of another pair.
  for (const [path, text, mode] of [
    [keyPath, pair.key, 0o600],
    [certPath, pair.cert, 0o644],
  ] as const) {
    const tmp = `${path}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, text, { mode });
    fs.chmodSync(tmp, mode);
    fs.renameSync(tmp, path);
  }
}

function usable(pair: PemPair | undefined, until: number, check: (c: X509Certificate) => boolean): boolean {
  if (!pair) return false;
  try {
    const cert = new X509Certificate(pair.cert);
    return new Date(cert.validFrom).getTime() <= Date.now() && new Date(cert.validTo).getTime() > until && check(cert);
  } catch {
    return false;
  }
}

function coversHosts(cert: X509Certificate, names: ReturnType<typeof serverNames>): boolean {
  const san = cert.subjectAltName ?? "";
  return (
    names.dnsNames.every((d) => san.includes(`DNS:${d}`)) &&
    names.ipAddresses.every((ip) => cert.checkIP(ip) !== undefined)
  );
}

/**
 * Makes what is missing under `dir` and reuses the rest: a new CA when there
 * is none or it expires, a new certificate for a name whose certificate is
 * missing, expiring, not signed by the CA, or lacks one of the hosts.
 */
export async function ensurePki(dir: string, options: EnsureOptions = {}): Promise<EnsureResult> {
  const names = options.names ?? SERVICE_NAMES;
  const until = (options.now ?? new Date()).getTime() + (options.renewBeforeMs ?? 7 * 24 * 60 * 60 * 1000);
  const hosts = serverNames(options.hosts ?? []);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const issued: string[] = [];
  const caCertPath = join(dir, "ca.crt");
  const caKeyPath = join(dir, "ca.key");
  let ca = readPair(caCertPath, caKeyPath);
  if (!usable(ca, until, (c) => c.ca && c.checkPrivateKey(createPrivateKey(ca!.key)))) {
    ca = await createCa();
    writePair(caCertPath, caKeyPath, ca);
    issued.push("ca");
  }
  const caCert = new X509Certificate(ca!.cert);
  for (const name of names) {
    const files = serviceTlsFiles(dir, name);
    const pair = readPair(files.certFile, files.keyFile);
    const ok = usable(
      pair,
      until,
      (c) => c.verify(caCert.publicKey) && c.checkPrivateKey(createPrivateKey(pair!.key)) && coversHosts(c, hosts),
    );
    if (!ok) {
      writePair(files.certFile, files.keyFile, await issueServiceCert(ca!, name, hosts));
      issued.push(name);
    }
  }
  return { dir, issued, files: (name) => serviceTlsFiles(dir, name) };
}
