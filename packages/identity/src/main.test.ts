// The service binary end to end: start with a valid environment (embedded
// PGlite in a temporary directory), answer /livez and /readyz, log in as the
// bootstrapped owner, stop cleanly on SIGTERM; start again on the same data
// and find the same key and owner (bootstrap changes nothing).
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { makeTestPki, type TestPki } from "@platform/pki/testing";

const dir = mkdtempSync(join(tmpdir(), "identity-main-"));
let pki: TestPki;
before(async () => {
  pki = await makeTestPki(["identity"]);
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
  pki.remove();
});
const kek = randomBytes(32).toString("hex");
const main = fileURLToPath(new URL("./main.ts", import.meta.url));

test("without TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE (and no INTERNAL_TLS=off) it exits 2 naming them", async () => {
  const run = promisify(execFile);
  const err = await run(process.execPath, ["--liftoff-only", "--import", "tsx", main], {
    env: { PATH: process.env.PATH ?? "", IDENTITY_AUTHKEY_KEK: kek, IDENTITY_DATA_DIR: dir },
  }).then(
    () => assert.fail("started without TLS settings"),
    (e: { code: number; stderr: string }) => e,
  );
  assert.equal(err.code, 2);
  assert.match(err.stderr, /TLS_CA_FILE, TLS_CERT_FILE and TLS_KEY_FILE/);
});

async function start(): Promise<{ child: ChildProcess; rest: string; out: () => string }> {
  const child = spawn(process.execPath, ["--liftoff-only", "--import", "tsx", main], {
    env: {
      ...pki.env("identity"),
      PATH: process.env.PATH ?? "",
      IDENTITY_AUTHKEY_KEK: kek,
      IDENTITY_DATA_DIR: dir,
      HOST: "127.0.0.1",
      SERVER_PORT: "0",
      IDENTITY_GRPC_PORT: "0",
      ARGON2_MEMORY_KIB: "1024",
      ARGON2_TIME_COST: "1",
      BOOTSTRAP_OWNER_EMAIL: "main@example.com",
      BOOTSTRAP_OWNER_PASSWORD: "main-password",
      BOOTSTRAP_ORG_NAME: "Main Org",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const rest = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start within 150 s:\n${out}`)), 150_000);
    child.on("exit", (code) => reject(new Error(`exited ${code}:\n${out}`)));
    child.stdout!.on("data", () => {
      const m = /"rest":"(http:\/\/[^"]+)"/.exec(out);
      if (m && out.includes("identity ready")) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
  });
  return { child, rest, out: () => out };
}

async function stop(child: ChildProcess): Promise<number | null> {
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  child.kill("SIGTERM");
  return exited;
}

test("starts, serves, stops on SIGTERM, restarts on the same data without changes", { timeout: 400_000 }, async () => {
  const first = await start();
  let kid1: string;
  try {
    assert.equal((await fetch(`${first.rest}/livez`)).status, 200);
    assert.equal((await fetch(`${first.rest}/readyz`)).status, 200);
    const login = await fetch(`${first.rest}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "MAIN@example.com", password: "main-password" }),
    });
    assert.equal(login.status, 200);
    const pair = (await login.json()) as { access_token: string };
    kid1 = JSON.parse(Buffer.from(pair.access_token.split(".")[0]!, "base64url").toString()).kid;
    assert.match(first.out(), /bootstrap owner created/);
    assert.match(first.out(), /"grpc":"https:\/\/127\.0\.0\.1:\d+"/);
    assert.ok(!first.out().includes("main-password"));
    assert.ok(!first.out().includes(kek));
  } finally {
    assert.equal(await stop(first.child), 0);
  }

  const second = await start();
  try {
    assert.match(second.out(), /nothing changed/);
    const login = await fetch(`${second.rest}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: "main@example.com", password: "main-password" }),
    });
    const pair = (await login.json()) as { access_token: string };
    assert.equal(
      JSON.parse(Buffer.from(pair.access_token.split(".")[0]!, "base64url").toString()).kid,
      kid1,
      "same signing key after restart",
    );
  } finally {
    assert.equal(await stop(second.child), 0);
  }
});
