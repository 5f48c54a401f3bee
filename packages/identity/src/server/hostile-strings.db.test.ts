// U+0000 (and lone surrogates) in identity's requests: refused by @platform/rpc
// before any handler, in identity's own words. Before the guard each of these
// reached PostgreSQL and answered 500 `internal` (INTERNAL on gRPC).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Client, Code, createClient, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AuthReason, IdentityRestCode } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { fromConnectError } from "@platform/rpc";
import { startTestServer, type TestServer } from "../testing/server.ts";

describe("hostile strings in identity requests", () => {
  let s: TestServer;
  let grpc: Client<typeof AuthService>;
  let token: string;
  before(async () => {
    s = await startTestServer();
    // The internal port's transport (with a client certificate where the server requires one).
    const own = (s as { grpcTransport?: (caller?: string) => Transport }).grpcTransport;
    grpc = createClient(AuthService, own ? own("agents") : createGrpcTransport({ baseUrl: s.grpcUrl }));
    token = (await s.login()).access_token;
  });
  after(() => s.close());

  test("login, API key, org: 400 invalid_request, nothing stored", async () => {
    const before = await s.call("GET", "/v1/users/me/api_keys", { token });
    const me = await s.call("GET", "/v1/users/me", { token });
    const orgId = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).org_id as string;
    const attempts = [
      s.call("POST", "/v1/auth/login", { body: { email: "owner@example.com\u0000", password: "owner-password-1" } }),
      s.call("POST", "/v1/auth/login", { raw: '{"email":"\\u0000@x","password":"p"}' }),
      s.call("POST", "/v1/auth/login", {
        body: { email: "owner@example.com", password: "owner-password-1", x_device_label: "lap\u0000top" },
      }),
      s.call("POST", "/v1/auth/login", {
        raw: '{"email":"owner@example.com","password":"owner-password-1","x_device_label":"\\ud800"}',
      }),
      s.call("POST", "/v1/users/me/api_keys", { token, idem: "k-1", body: { name: "a\u0000b" } }),
      s.call("PATCH", `/v1/orgs/${orgId}`, { token, idem: "k-2", body: { name: "Acme\u0000" } }),
    ];
    for (const r of await Promise.all(attempts)) {
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.code, IdentityRestCode.invalidRequest, r.text);
    }
    assert.deepEqual((await s.call("GET", "/v1/users/me/api_keys", { token })).json, before.json);
    assert.equal((await s.call("GET", `/v1/orgs/${orgId}`, { token })).json.name, "Acme Inc");
    assert.equal(me.status, 200);
  });

  test("an Idempotency-Key that is not 1-255 visible ASCII characters (UTF-8 bytes, 10,000 characters) is 400", async () => {
    for (const key of [Buffer.from("schlüssel-日本", "utf8").toString("latin1"), "k".repeat(10_000), "a b"]) {
      const r = await s.call("POST", "/v1/users/me/api_keys", { token, idem: key, body: { name: "k" } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.code, IdentityRestCode.invalidRequest);
    }
  });

  test("refresh: 401 refresh_token_invalid (an unknown token); logout: 204 as always", async () => {
    const r = await s.call("POST", "/v1/auth/refresh", { body: { refresh_token: "rt_\u0000" } });
    assert.equal(r.status, 401, r.text);
    assert.equal(r.json.code, IdentityRestCode.refreshTokenInvalid);
    const out = await s.call("POST", "/v1/auth/logout", { body: { refresh_token: "rt_\u0000" } });
    assert.equal(out.status, 204, out.text);
  });

  test("gRPC: GetPublicKey NOT_FOUND kid_unknown; Verify* UNAUTHENTICATED invalid_credentials", async () => {
    const kid = fromConnectError(await grpc.getPublicKey({ kid: "k\u0000" }).catch((e) => e));
    assert.equal(kid.code, Code.NotFound);
    assert.equal(kid.reason, AuthReason.kidUnknown);
    for (const call of [
      grpc.verifyToken({ token: "sk_live_\u0000" }),
      grpc.verifyJWT({ token: "a.b\u0000.c" }),
      grpc.verifyAPIKey({ apiKey: "sk_live_\u0000" }),
    ]) {
      const e = fromConnectError(await call.catch((err) => err));
      assert.equal(e.code, Code.Unauthenticated);
      assert.equal(e.reason, AuthReason.invalidCredentials);
    }
  });
});
