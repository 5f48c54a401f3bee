// The one mapping of identity's answers for every service that verifies
// credentials (agents, the runtime router), against identity's AuthService
// served by the platform's rpc server (the double, and one-off servers for
// the answers the double does not give).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { ServiceImpl } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { isApiKeyFormat } from "@platform/credentials";
import { Code, PlatformError } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { makeTestPki } from "@platform/pki/testing";
import { codeNameEnvelope, createServer, createServiceTransport, loadServiceTls } from "@platform/rpc";
import { pino } from "pino";
import { IdentityClient } from "./identity-client.ts";
import { IdentityDouble } from "./testing/identity-double.ts";

const grpc = (baseUrl: string) => new IdentityClient(createGrpcTransport({ baseUrl }), 2000);

async function refusal(p: Promise<unknown>): Promise<PlatformError> {
  const err = await p.then(
    () => assert.fail("verified"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof PlatformError, String(err));
  return err;
}

/** An AuthService whose every method fails with `fail`, and the health check serving. */
async function failing(fail: () => never) {
  const impl: Partial<ServiceImpl<typeof AuthService>> = { verifyToken: fail, verifyJWT: fail, verifyAPIKey: fail };
  const server = createServer({
    name: "identity-failing",
    envelope: codeNameEnvelope("identity-failing"),
    logger: pino({ level: "silent" }),
    shutdownTimeoutMs: 500,
    services: [{ service: AuthService, impl }],
  });
  return { server, url: (await server.listen()).url };
}

describe("IdentityClient", () => {
  const identity = new IdentityDouble();
  let client: IdentityClient;
  before(async () => {
    client = grpc(await identity.start());
  });
  after(() => identity.stop());

  test("a person's token and an API key verify to who they stand for; only a key carries scopes", async () => {
    const person = identity.caller();
    assert.deepEqual(await client.verifyToken(person.token), {
      userId: person.userId,
      orgId: person.orgId,
      method: "jwt_session",
    });
    assert.deepEqual(await client.verifyJwt(person.token), await client.verifyToken(person.token));
    const key = identity.apiKey(["read"]);
    assert.ok(isApiKeyFormat(key.token), "the double's keys have the services' API key shape");
    const verified = await client.verifyApiKey(key.token);
    assert.deepEqual(verified.scopes, ["read"]);
    assert.equal((await client.verifyToken(key.token)).orgId, key.orgId);
    // The right method for each credential: a key is not a JWT.
    assert.equal((await refusal(client.verifyJwt(key.token))).code, Code.Unauthenticated);
  });

  test("a refused credential is unauthenticated with identity's reason; an empty one never reaches identity", async () => {
    const before_ = identity.verifyCalls;
    const empty = await refusal(client.verifyToken(""));
    assert.equal(empty.code, Code.Unauthenticated);
    assert.equal(identity.verifyCalls, before_);
    const wrong = await refusal(client.verifyJwt("not.a.token"));
    assert.equal(wrong.code, Code.Unauthenticated);
    assert.equal(wrong.reason, "invalid_credentials");
  });

  test("INVALID_ARGUMENT from identity is the credential's fault (401); INTERNAL is identity's (503)", async () => {
    const bad = await failing(() => {
      throw PlatformError.invalidArgument("token too long", "token_malformed");
    });
    const broken = await failing(() => {
      throw PlatformError.internal("boom");
    });
    try {
      const malformed = await refusal(grpc(bad.url).verifyToken("x"));
      assert.equal(malformed.code, Code.Unauthenticated);
      assert.equal(malformed.reason, "token_malformed");
      assert.equal((await refusal(grpc(broken.url).verifyApiKey("x"))).code, Code.Unavailable);
    } finally {
      await bad.server.close();
      await broken.server.close();
    }
  });

  test("identity down: unavailable, and not reachable; back: reachable again", async () => {
    assert.equal(await client.reachable(), true);
    await identity.stop();
    try {
      const down = await refusal(client.verifyToken(identity.caller().token));
      assert.equal(down.code, Code.Unavailable);
      assert.equal(await client.reachable(), false);
    } finally {
      await identity.start();
    }
    assert.equal(await client.reachable(), true);
  });
});

describe("IdentityClient over mutual TLS", () => {
  test("identity refusing this service's certificate (PERMISSION_DENIED) is unavailable, never a 401, and not ready", async () => {
    const pki = await makeTestPki(["identity", "runtime-router", "agents"]);
    const identity = new IdentityDouble({ tls: loadServiceTls(pki.env("identity")), callers: ["runtime-router"] });
    const url = await identity.start();
    try {
      const as = (name: string) =>
        new IdentityClient(
          createServiceTransport({ baseUrl: url, tls: loadServiceTls(pki.env(name)), expectServer: "identity" }),
        );
      const person = identity.caller();
      assert.equal((await as("runtime-router").verifyToken(person.token)).userId, person.userId);
      assert.equal(await as("runtime-router").reachable(), true);
      const refused = await refusal(as("agents").verifyToken(person.token));
      assert.equal(refused.code, Code.Unavailable);
      assert.equal(await as("agents").reachable(), false);
    } finally {
      await identity.stop();
      pki.remove();
    }
  });
});
