// Issue 14 item 4: identity's entry points accept only the exact compact JWS
// and the exact API key format, and `Authorization: Bearer <token>` with one
// space. Every loose variant of a genuine token is refused: REST with 401
// unauthenticated, VerifyJWT / VerifyToken / VerifyAPIKey over the real gRPC
// port with UNAUTHENTICATED invalid_credentials.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { acceptedHeaders, looseHeaderVariants, looseTokenVariants, rawRequest } from "@platform/credentials/testing";
import { AuthReason } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { fromConnectError } from "@platform/rpc";
import { type TestServer, startTestServer } from "../testing/server.ts";

let s: TestServer;
let grpc: ReturnType<typeof createClient<typeof AuthService>>;
let jwt: string;
let apiKey: string;
before(async () => {
  s = await startTestServer();
  grpc = createClient(AuthService, s.grpcTransport("agents"));
  jwt = (await s.login()).access_token;
  apiKey = (await s.call("POST", "/v1/users/me/api_keys", { token: jwt, idem: "strict-1", body: { name: "strict" } }))
    .json.raw_key;
});
after(() => s.close());

async function invalidCredentials(call: Promise<unknown>, what: string) {
  const err = await call.then(
    () => assert.fail(`${what}: accepted`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ConnectError, what);
  assert.equal(err.code, Code.Unauthenticated, what);
  assert.equal(fromConnectError(err).reason, AuthReason.invalidCredentials, what);
}

describe("REST: GET /v1/users/me", () => {
  test("the exact header is accepted, with the scheme in any case", async () => {
    for (const token of [jwt, apiKey]) {
      for (const authorization of acceptedHeaders(token)) {
        const r = await rawRequest(s.base, { method: "GET", path: "/v1/users/me", authorization });
        assert.equal(r.status, 200, `${authorization.slice(0, 8)}: ${r.body}`);
      }
    }
  });

  test("every loose variant is 401 unauthenticated (or 400 from HTTP itself for CR/LF/NUL)", async () => {
    for (const token of [jwt, apiKey]) {
      for (const v of looseHeaderVariants(token)) {
        const r = await rawRequest(s.base, { method: "GET", path: "/v1/users/me", authorization: v.value });
        const what = `${token === jwt ? "JWT" : "API key"}: ${v.what} → ${r.status} ${r.body.slice(0, 120)}`;
        if (v.http === "same") assert.equal(r.status, 200, what);
        else if (v.http === "refused-by-http") assert.equal(r.status, 400, what);
        else {
          assert.equal(r.status, 401, what);
          assert.equal(JSON.parse(r.body).code, "unauthenticated", what);
        }
      }
    }
  });
});

describe("gRPC on the internal port", () => {
  test("VerifyJWT and VerifyToken accept the exact token and the exact header form", async () => {
    assert.ok((await grpc.verifyJWT({ token: jwt })).context?.userId);
    assert.ok((await grpc.verifyToken({ token: jwt })).context?.userId);
    assert.ok((await grpc.verifyToken({ token: `bearer ${apiKey}` })).context?.apiKeyId);
    assert.ok((await grpc.verifyAPIKey({ apiKey })).context?.apiKeyId);
  });

  test("VerifyJWT refuses every loose variant of a JWT with invalid_credentials", async () => {
    for (const [what, variant] of looseTokenVariants(jwt)) {
      await invalidCredentials(grpc.verifyJWT({ token: variant }), `VerifyJWT ${what}`);
      await invalidCredentials(grpc.verifyJWT({ token: `Bearer ${variant}` }), `VerifyJWT Bearer + ${what}`);
    }
    await invalidCredentials(grpc.verifyJWT({ token: `Bearer  ${jwt}` }), "VerifyJWT two spaces after Bearer");
  });

  test("VerifyToken refuses every loose variant of a JWT or an API key with invalid_credentials", async () => {
    for (const token of [jwt, apiKey]) {
      for (const [what, variant] of looseTokenVariants(token)) {
        await invalidCredentials(grpc.verifyToken({ token: variant }), `VerifyToken ${what}`);
      }
      await invalidCredentials(grpc.verifyToken({ token: `Bearer  ${token}` }), "VerifyToken two spaces after Bearer");
      await invalidCredentials(grpc.verifyToken({ token: `Bearer\t${token}` }), "VerifyToken tab after Bearer");
    }
  });

  test("VerifyAPIKey refuses every loose variant of an API key", async () => {
    for (const [what, variant] of looseTokenVariants(apiKey))
      await invalidCredentials(grpc.verifyAPIKey({ apiKey: variant }), `VerifyAPIKey ${what}`);
  });
});
