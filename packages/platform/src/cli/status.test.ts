// `platform status` on an internal mutual-TLS port: asked for its /readyz and
// version with the launcher's operator certificate when this user can read it,
// only checked for a listener when not, and refused by a server of another CA.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { ensurePki, serviceTlsFiles } from "@platform/pki";
import { makeTestPki, type TestPki } from "@platform/pki/testing";
import { readFileSync } from "node:fs";

const run = promisify(execFile);
const bin = new URL("../../bin/platform.mjs", import.meta.url).pathname;

type Status = { ok: boolean; services: Array<{ name: string; state: string; version: string | null; ready: boolean }> };

async function status(dataDir: string): Promise<{ code: number; body: Status }> {
  const env = { ...process.env, PLATFORM_DATA_DIR: dataDir, PLATFORM_CONFIG_DIR: join(dataDir, "cli") };
  const r = await run(process.execPath, [bin, "status", "--json"], { env }).then(
    (out) => ({ code: 0, stdout: out.stdout }),
    (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
  );
  return { code: r.code, body: JSON.parse(r.stdout) as Status };
}

/** An internal port as the services hold it: TLS that requires a client certificate of `ca`. */
function internalServer(files: { caFile: string; certFile: string; keyFile: string }, seen: string[]): Promise<Server> {
  const server = createServer(
    {
      ca: readFileSync(files.caFile),
      cert: readFileSync(files.certFile),
      key: readFileSync(files.keyFile),
      requestCert: true,
      rejectUnauthorized: true,
    },
    (req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ status: "ready", service: "compute", version: "9.8.7" }));
    },
  );
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

describe("platform status on an internal mutual-TLS port", () => {
  let dataDir: string;
  let server: Server;
  let foreign: TestPki;
  let foreignServer: Server;
  const seen: string[] = [];

  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "platform-status-"));
    const tlsDir = join(dataDir, "tls");
    await ensurePki(tlsDir, { names: ["compute", "operator"] });
    server = await internalServer(serviceTlsFiles(tlsDir, "compute"), seen);
    foreign = await makeTestPki(["compute"]);
    foreignServer = await internalServer(foreign.files("compute"), []);
  });
  after(() => {
    server.close();
    foreignServer.close();
    foreign.remove();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const endpoints = (port: number) =>
    writeFileSync(
      join(dataDir, "platform.json"),
      JSON.stringify({ endpoints: { computeGrpc: `https://127.0.0.1:${port}` } }),
    );

  test("with the operator certificate: its /readyz answer and version", async () => {
    endpoints((server.address() as AddressInfo).port);
    const { code, body } = await status(dataDir);
    assert.equal(code, 0, JSON.stringify(body));
    assert.deepEqual(
      body.services.map((s) => [s.name, s.state, s.version]),
      [["compute gRPC", "ready", "9.8.7"]],
    );
    assert.deepEqual(seen, ["GET /readyz"]);
  });

  test("a server of another CA is not taken for ours", async () => {
    endpoints((foreignServer.address() as AddressInfo).port);
    const { code, body } = await status(dataDir);
    assert.equal(code, 1);
    assert.equal(body.services[0]?.state, "unreachable");
    assert.equal(body.services[0]?.version, null);
  });

  test("without a readable operator certificate: checked for a listener only", async () => {
    endpoints((server.address() as AddressInfo).port);
    rmSync(serviceTlsFiles(join(dataDir, "tls"), "operator").keyFile);
    const before = seen.length;
    const { code, body } = await status(dataDir);
    assert.equal(code, 0);
    assert.deepEqual(
      body.services.map((s) => [s.state, s.version]),
      [["listening", null]],
    );
    assert.equal(seen.length, before, "no request without a certificate");
  });
});
