import { checkServerIdentity, type PeerCertificate, type SecureContextOptions } from "node:tls";
import { type ServiceTls, serviceNameOf } from "./service-tls.ts";
import { X509Certificate } from "node:crypto";

/**
 * TLS options of an outgoing internal call: this service's certificate as
 * the client certificate, only the platform CA trusted, and (with `expect`)
 * the server's certificate must name that service.
 */
export function clientTlsOptions(
  tls: ServiceTls,
  expect?: string,
): SecureContextOptions & { checkServerIdentity: (host: string, cert: PeerCertificate) => Error | undefined } {
  return {
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    checkServerIdentity(host, cert) {
      const err = checkServerIdentity(host, cert);
      if (err || expect === undefined) return err;
      const name = cert.raw ? serviceNameOf(new X509Certificate(cert.raw)) : undefined;
      return name === expect ? undefined : new Error(`the server at ${host} is "${name ?? "?"}", not "${expect}"`);
    },
  };
}
