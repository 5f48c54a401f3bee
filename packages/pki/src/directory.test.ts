import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import * as fs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { issueServiceCert } from "./certificates.ts";
import { ensurePki, SERVICE_NAMES, serviceTlsFiles } from "./directory.ts";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});
// The directory made here, not only its tls/ (which left one empty pki-test-* behind per case).
const tempDir = () => {
  const made = fs.mkdtempSync(join(tmpdir(), "pki-test-"));
  dirs.push(made);
  return join(made, "tls");
};
const read = (p: string) => fs.readFileSync(p, "utf8");

test("first start makes the CA and one certificate per service; keys are 0600", async () => {
  const dir = tempDir();
  const r = await ensurePki(dir, { hosts: ["127.0.0.3"] });
  assert.deepEqual(r.issued, ["ca", ...SERVICE_NAMES]);
  assert.equal(fs.statSync(dir).mode & 0o777, 0o700);
  assert.equal(fs.statSync(join(dir, "ca.key")).mode & 0o777, 0o600);
  const ca = new X509Certificate(read(join(dir, "ca.crt")));
  assert.ok(ca.ca);
  for (const name of SERVICE_NAMES) {
    const f = serviceTlsFiles(dir, name);
    assert.equal(fs.statSync(f.keyFile).mode & 0o777, 0o600, name);
    const cert = new X509Certificate(read(f.certFile));
    assert.equal(cert.subject, `CN=${name}`);
    assert.ok(cert.verify(ca.publicKey), name);
    assert.ok(cert.checkIssued(ca), name);
    assert.ok(cert.subjectAltName?.includes(`URI:spiffe://platform/${name}`), cert.subjectAltName);
    assert.equal(cert.checkHost("localhost"), "localhost");
    assert.equal(cert.checkIP("127.0.0.1"), "127.0.0.1");
    assert.equal(cert.checkIP("127.0.0.3"), "127.0.0.3");
    assert.equal(cert.checkIP("10.0.0.1"), undefined);
    assert.equal(cert.ca, false);
  }
});

test("a second start reuses every file; a missing, foreign or expired certificate is issued anew", async () => {
  const dir = tempDir();
  await ensurePki(dir);
  const before = new Map(SERVICE_NAMES.map((n) => [n, read(serviceTlsFiles(dir, n).certFile)]));
  assert.deepEqual((await ensurePki(dir)).issued, []);
  for (const n of SERVICE_NAMES) assert.equal(read(serviceTlsFiles(dir, n).certFile), before.get(n));

  fs.rmSync(serviceTlsFiles(dir, "compute").certFile);
  const otherDir = tempDir();
  await ensurePki(otherDir, { names: ["agents"] });
  fs.copyFileSync(serviceTlsFiles(otherDir, "agents").certFile, serviceTlsFiles(dir, "agents").certFile);
  fs.copyFileSync(serviceTlsFiles(otherDir, "agents").keyFile, serviceTlsFiles(dir, "agents").keyFile);
  const ca = { cert: read(join(dir, "ca.crt")), key: read(join(dir, "ca.key")) };
  const old = await issueServiceCert(ca, "operator", {
    notBefore: new Date(Date.now() - 10 * 86_400_000),
    validDays: 9,
  });
  fs.writeFileSync(serviceTlsFiles(dir, "operator").certFile, old.cert);
  fs.writeFileSync(serviceTlsFiles(dir, "operator").keyFile, old.key);

  const r = await ensurePki(dir);
  assert.deepEqual(r.issued.sort(), ["agents", "compute", "operator"]);
  assert.equal(read(serviceTlsFiles(dir, "identity").certFile), before.get("identity"));
  const caCert = new X509Certificate(ca.cert);
  for (const n of ["agents", "compute", "operator"]) {
    assert.ok(new X509Certificate(read(serviceTlsFiles(dir, n).certFile)).verify(caCert.publicKey), n);
  }
});

test("a new CA (the old one removed) re-issues every service certificate", async () => {
  const dir = tempDir();
  await ensurePki(dir);
  fs.rmSync(join(dir, "ca.key"));
  const r = await ensurePki(dir);
  assert.deepEqual(r.issued, ["ca", ...SERVICE_NAMES]);
});

test("a host added later (PLATFORM_HOST) re-issues the certificates that lack it", async () => {
  const dir = tempDir();
  await ensurePki(dir, { names: ["identity"] });
  assert.deepEqual((await ensurePki(dir, { names: ["identity"], hosts: ["127.0.0.5"] })).issued, ["identity"]);
  assert.deepEqual((await ensurePki(dir, { names: ["identity"], hosts: ["127.0.0.5"] })).issued, []);
});
