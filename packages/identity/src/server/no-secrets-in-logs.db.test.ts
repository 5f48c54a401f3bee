// Issue 24 item 5: structured logs stay pino JSON, every line of a request
// carries its request id and trace id, and no secret is ever written, at
// LOG_LEVEL=trace (the lowest level). The secrets: the KEK and the signing
// private key the service holds from its start, the owner's and a new
// member's passwords, access and refresh tokens, a raw API key, an
// invitation token, and bearer credentials on REST and gRPC, valid or not.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { after, before, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { startTestServer, type TestServer } from "../testing/server.ts";

const KEK = randomBytes(32).toString("hex");
const OWNER_PASSWORD = `owner-${randomBytes(12).toString("hex")}`;
let s: TestServer;

before(async () => {
  s = await startTestServer({
    LOG_LEVEL: "trace",
    IDENTITY_AUTHKEY_KEK: KEK,
    BOOTSTRAP_OWNER_PASSWORD: OWNER_PASSWORD,
  });
});
after(() => s?.close());

const idem = () => randomUUID();

/** The forms a secret could be logged in: as is, and as base64/base64url/hex of its bytes where it is binary. */
function forms(secret: string | Buffer): string[] {
  if (typeof secret === "string") return [secret];
  return [secret.toString("base64"), secret.toString("base64url"), secret.toString("hex")].map((f) => f.slice(0, 48));
}

test("at LOG_LEVEL=trace no log line holds a secret; every request line names its request and trace", async () => {
  const secrets: [string, string | Buffer][] = [
    ["KEK", KEK],
    ["KEK bytes", Buffer.from(KEK, "hex")],
    ["owner password", OWNER_PASSWORD],
  ];
  const { privateKey } = await s.identity.keys.active();
  secrets.push([
    "signing key (PEM body)",
    privateKey.export({ type: "pkcs8", format: "pem" }).toString().split("\n")[1]!,
  ]);
  secrets.push(["signing key (DER)", privateKey.export({ type: "pkcs8", format: "der" }).subarray(30, 90)]);

  const wrong = await s.call("POST", "/v1/auth/login", {
    body: { email: "owner@example.com", password: "wrong-password-that-is-secret" },
  });
  assert.equal(wrong.status, 401);
  secrets.push(["a wrong password", "wrong-password-that-is-secret"]);

  const pair = await s.login("owner@example.com", OWNER_PASSWORD);
  secrets.push(["access token", pair.access_token], ["refresh token", pair.refresh_token]);
  const orgId = JSON.parse(Buffer.from(pair.access_token.split(".")[1]!, "base64url").toString()).org_id as string;

  const refreshed = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: pair.refresh_token } });
  assert.equal(refreshed.status, 200, refreshed.text);
  secrets.push(
    ["refreshed access token", refreshed.json.access_token],
    ["new refresh token", refreshed.json.refresh_token],
  );
  // Reuse of a rotated refresh token: the failure path logs too.
  assert.equal((await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: pair.refresh_token } })).status, 401);
  const token = refreshed.json.access_token as string;

  const key = await s.call("POST", "/v1/users/me/api_keys", { token, idem: idem(), body: { name: "logged?" } });
  assert.equal(key.status, 201, key.text);
  const rawKey = key.json.raw_key as string;
  secrets.push(["raw API key", rawKey]);
  assert.equal((await s.call("GET", "/v1/users/me", { token: rawKey })).status, 200);
  // A key that is almost right and a bearer that is not a token at all.
  const forged = `${rawKey.slice(0, -4)}abcd`;
  assert.equal((await s.call("GET", "/v1/users/me", { token: forged })).status, 401);
  const garbage = `not-a-token-${randomBytes(16).toString("hex")}`;
  assert.equal((await s.call("GET", "/v1/users/me", { token: garbage })).status, 401);
  secrets.push(["forged API key", forged], ["garbage bearer", garbage]);

  const inv = await s.call("POST", `/v1/orgs/${orgId}/invitations`, {
    token,
    idem: idem(),
    body: { email: `logs-${process.pid}@example.com`, role: "member" },
  });
  assert.equal(inv.status, 201, inv.text);
  const memberPassword = `member-${randomBytes(12).toString("hex")}`;
  const accepted = await s.call("POST", "/v1/invitations/accept", {
    body: { token: inv.json.token, password: memberPassword, name: "M" },
  });
  assert.equal(accepted.status, 200, accepted.text);
  secrets.push(["invitation token", inv.json.token], ["member password", memberPassword]);
  secrets.push(
    ["member access token", accepted.json.access_token],
    ["member refresh token", accepted.json.refresh_token],
  );
  const newPassword = `changed-${randomBytes(12).toString("hex")}`;
  const changed = await s.call("POST", "/v1/users/me/password", {
    token: accepted.json.access_token,
    idem: idem(),
    body: { current_password: memberPassword, new_password: newPassword },
  });
  assert.ok(changed.status < 300, changed.text);
  secrets.push(["changed password", newPassword]);

  // The internal port: agents' verification of a JWT and an API key, and a bearer it refuses.
  const grpc = createClient(AuthService, s.grpcTransport("agents"));
  await grpc.verifyToken({ token: `Bearer ${token}` });
  await grpc.verifyToken({ token: `Bearer ${rawKey}` });
  await grpc.verifyToken({ token: `Bearer ${garbage}x` }).catch(() => {});
  secrets.push(["garbage bearer on gRPC", `${garbage}x`]);

  const logout = await s.call("POST", "/v1/auth/logout", {
    token,
    idem: idem(),
    body: { refresh_token: refreshed.json.refresh_token },
  });
  assert.ok(logout.status < 300, logout.text);

  const lines = s.logs.lines;
  assert.equal(s.app.logger.level, "trace");
  for (const [what, secret] of secrets)
    for (const form of forms(secret)) {
      const at = lines.find((l) => l.includes(form));
      assert.equal(at, undefined, `${what} in a log line: ${at}`);
    }

  // Every line written while a request was served names it: the access lines and any other line with a requestId.
  const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  const requestLines = parsed.filter((l) => l.msg === "request");
  assert.ok(requestLines.length >= 15, `${requestLines.length} access lines`);
  for (const l of parsed.filter((x) => x.requestId !== undefined || x.msg === "request"))
    assert.match(String(l.traceId), /^[A-Za-z0-9._:-]{1,128}$/, JSON.stringify(l));
  for (const l of requestLines) assert.match(String(l.requestId), /^[A-Za-z0-9._:-]{1,128}$/, JSON.stringify(l));
});
