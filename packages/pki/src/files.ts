// Where the launcher's PKI directory keeps each file: path names only, so a
// program that just reads the files (the CLI) need not load the certificate
// code (@peculiar/x509 and its dependencies took ~430 ms of CPU to import,
// half of a CLI command's start).
import { join } from "node:path";

/** The three files a service reads (TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE). */
export interface ServiceTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

/** Where the launcher's PKI directory keeps the CA and `name`'s certificate and key. */
export function serviceTlsFiles(dir: string, name: string): ServiceTlsFiles {
  return { caFile: join(dir, "ca.crt"), certFile: join(dir, `${name}.crt`), keyFile: join(dir, `${name}.key`) };
}
