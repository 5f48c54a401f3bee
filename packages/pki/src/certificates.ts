// Certificates of the platform's private CA, made with @peculiar/x509 on
// Node's WebCrypto. ECDSA P-256: keys are made in a millisecond (a launcher's
// first start issues seven), and every TLS stack the platform meets (Node,
// grpcio's BoringSSL, Go's buf) speaks it.
import "reflect-metadata";
import { randomBytes, webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 24 * 60 * 60 * 1000;

/** A certificate and its private key, both PEM (the key as PKCS#8). */
export interface PemPair {
  cert: string;
  key: string;
}

export interface IssueOptions {
  /** DNS names the certificate is valid for as a server. */
  dnsNames?: readonly string[];
  /** IP addresses the certificate is valid for as a server. */
  ipAddresses?: readonly string[];
  validDays?: number;
  /** Start of validity; default one hour ago (clocks of two hosts differ a little). */
  notBefore?: Date;
}

/** The URI SAN naming a service: the identity a server checks besides the CN. */
export function spiffeId(name: string): string {
  return `spiffe://platform/${name}`;
}

// Names go into a DN string; a service name is a short lowercase token.
const namePattern = /^[a-z][a-z0-9-]{0,62}$/;

function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f; // a positive INTEGER
  return bytes.toString("hex");
}

async function newKeys(): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(algorithm, true, ["sign", "verify"])) as CryptoKeyPair;
}

async function keyPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(der, "PRIVATE KEY");
}

async function importKey(pem: string): Promise<CryptoKey> {
  return (await webcrypto.subtle.importKey("pkcs8", x509.PemConverter.decodeFirst(pem), algorithm, false, [
    "sign",
  ])) as CryptoKey;
}

function validity(options: IssueOptions, defaultDays: number): { notBefore: Date; notAfter: Date } {
  const notBefore = options.notBefore ?? new Date(Date.now() - 60 * 60 * 1000);
  return { notBefore, notAfter: new Date(notBefore.getTime() + (options.validDays ?? defaultDays) * DAY_MS) };
}

/** A new self-signed CA that may sign end-entity certificates only (path length 0). */
export async function createCa(options: { commonName?: string; validDays?: number } = {}): Promise<PemPair> {
  const keys = await newKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${options.commonName ?? "platform internal CA"}`,
    ...validity({ validDays: options.validDays }, 3650),
    signingAlgorithm: algorithm,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: cert.toString("pem"), key: await keyPem(keys.privateKey) };
}

/**
 * A certificate for service `name`, signed by `ca`: subject CN=name, URI SAN
 * spiffe://platform/name, usable both as a TLS server and as a TLS client.
 */
export async function issueServiceCert(ca: PemPair, name: string, options: IssueOptions = {}): Promise<PemPair> {
  if (!namePattern.test(name)) throw new Error(`not a service name: ${JSON.stringify(name)}`);
  const caCert = new x509.X509Certificate(ca.cert);
  const keys = await newKeys();
  const altNames: x509.JsonGeneralNames = [
    { type: "url", value: spiffeId(name) },
    ...(options.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: "ip" as const, value })),
  ];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${name}`,
    issuer: caCert.subject,
    ...validity(options, 365),
    signingAlgorithm: algorithm,
    publicKey: keys.publicKey,
    signingKey: await importKey(ca.key),
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      new x509.SubjectAlternativeNameExtension(altNames),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(caCert),
    ],
  });
  return { cert: cert.toString("pem"), key: await keyPem(keys.privateKey) };
}
