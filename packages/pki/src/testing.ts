// A throw-away PKI for tests: a CA and every service's certificate in a
// temporary directory, the same layout the launcher keeps.
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCa, type IssueOptions, issueServiceCert, type PemPair } from "./certificates.ts";
import { ensurePki, SERVICE_NAMES, type ServiceTlsFiles, serviceTlsFiles, tlsEnv } from "./directory.ts";

export interface TestPki {
  dir: string;
  files(name: string): ServiceTlsFiles;
  /** TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE of `name`. */
  env(name: string): Record<string, string>;
  /** The PEM texts of `name` and of the CA. */
  pem(name: string): { ca: string; cert: string; key: string };
  /** Issues (and writes) one more certificate from this CA, e.g. with odd names or dates. */
  issue(name: string, options?: IssueOptions): Promise<ServiceTlsFiles>;
  remove(): void;
}

/**
 * Every test PKI's directory still on disk, removed when the test process
 * exits: it holds private keys, and a test that forgot remove() left one in
 * the temp directory per CI run.
 */
const leftToRemove = new Set<string>();
process.once("exit", () => {
  for (const dir of leftToRemove) fs.rmSync(dir, { recursive: true, force: true });
});

/** A throwaway CA and one certificate per service name in a temp directory, for tests of mutual TLS. */
export async function makeTestPki(names: readonly string[] = SERVICE_NAMES): Promise<TestPki> {
  const dir = fs.mkdtempSync(join(tmpdir(), "platform-pki-"));
  leftToRemove.add(dir);
  await ensurePki(dir, { names });
  const read = (p: string) => fs.readFileSync(p, "utf8");
  const files = (name: string) => serviceTlsFiles(dir, name);
  const ca: PemPair = { cert: read(join(dir, "ca.crt")), key: read(join(dir, "ca.key")) };
  let extra = 0;
  return {
    dir,
    files,
    env: (name) => tlsEnv(files(name)),
    pem: (name) => ({ ca: ca.cert, cert: read(files(name).certFile), key: read(files(name).keyFile) }),
    async issue(name, options = { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1", "::1"] }) {
      const pair = await issueServiceCert(ca, name, options);
      const base = join(dir, `extra-${++extra}-${name}`);
      fs.writeFileSync(`${base}.crt`, pair.cert);
      fs.writeFileSync(`${base}.key`, pair.key, { mode: 0o600 });
      return { caFile: join(dir, "ca.crt"), certFile: `${base}.crt`, keyFile: `${base}.key` };
    },
    remove: () => {
      fs.rmSync(dir, { recursive: true, force: true });
      leftToRemove.delete(dir);
    },
  };
}

export { createCa };
