// Issue 19 item 5: the real server rotates its signing key on its own
// (short IDENTITY_KEY_* settings) while a verifier outside (jose's
// createRemoteJWKSet, with its cache and cooldown) and VerifyJWT check every
// token still valid: not one failure across the switch; the old key is
// refused (key_retired, GetPublicKey kid_unknown) once its retention is over.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { AuthReason } from "@platform/errors";
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, errors, jwtVerify } from "jose";
import { startTestServer, type TestServer } from "../testing/server.ts";

let s: TestServer;

/**
 * A token that expired while the loop was checking the tokens before it (a
 * loaded CI machine stalled it for seconds) may have outlived its key's
 * retention too: then "no such key" is the right answer (jose looks the key
 * up before it reads the expiry), not a failure of the overlap measured.
 */
const expiredWhileChecked = (t: { exp: number }) => Date.now() >= t.exp;
before(async () => {
  // Pre-publication (2 s) longer than the verifier's cooldown (1 s): the new key is in any key set fetched after the cooldown.
  s = await startTestServer({
    JWT_TTL: "3s",
    IDENTITY_KEY_ROTATION_INTERVAL: "6s",
    IDENTITY_KEY_PREPUBLISH: "2s",
    IDENTITY_KEY_RETENTION: "4s",
  });
});
after(() => s.close());

test("the schedule rotates on its own; an outside verifier never fails during the overlap; the old key is refused after retention", {
  timeout: 180_000,
}, async (t) => {
  const first = await s.identity.keys.ensureActiveKey();
  const jwks = createRemoteJWKSet(new URL(`${s.base}/.well-known/jwks.json`), {
    cooldownDuration: 1000,
    cacheMaxAge: 2000,
  });
  const tokens: { token: string; kid: string; exp: number }[] = [];
  const started = Date.now();
  // For a failure's message: when it happened, how long the token had left, and the keys' rows then.
  let keyRows = "";
  const where = (t: { exp: number }) =>
    `at +${Date.now() - started} ms, ${t.exp - Date.now()} ms before its expiry; keys: ${keyRows}`;
  const failures: string[] = [];
  let verified = 0;
  let firstToken: string | undefined;
  let second: string | undefined;
  const deadline = Date.now() + 120_000;
  // Until the first key has been retired: log in, then verify every unexpired token both ways.
  while (Date.now() < deadline) {
    const token = (await s.login()).access_token;
    const kid = String(decodeProtectedHeader(token).kid);
    firstToken ??= token;
    if (kid !== first) second ??= kid;
    tokens.push({ token, kid, exp: decodeJwt(token).exp! * 1000 });
    // A token a few hundred ms from its expiry may expire while checked: that is not what is measured.
    for (const t of tokens.filter((x) => x.exp > Date.now() + 500)) {
      await jwtVerify(t.token, jwks, { issuer: "identity.platform", audience: "agents", algorithms: ["RS256"] }).then(
        () => verified++,
        (e: Error) => {
          if (!(e instanceof errors.JWTExpired) && !expiredWhileChecked(t))
            failures.push(`jose ${t.kid === first ? "first" : "second"} key ${t.kid}: ${e.message} (${where(t)})`);
        },
      );
      await s.identity.jwt.verify(t.token).then(
        () => verified++,
        (e: Error & { reason?: string }) => {
          if (e.reason !== AuthReason.expired && !expiredWhileChecked(t))
            failures.push(
              `VerifyJWT ${t.kid === first ? "first" : "second"} key ${t.kid}: ${e.reason ?? e.message} (${where(t)})`,
            );
        },
      );
    }
    const rows = await s.identity.db
      .selectFrom("signing_keys")
      .select(["kid", "state", "created_at", "activated_at", "deactivated_at"])
      .execute();
    keyRows = rows
      .map((r) =>
        [r.kid.slice(0, 8), r.state, r.created_at, r.activated_at, r.deactivated_at]
          .map((v) => (v instanceof Date ? `${v.getTime() - started}` : (v ?? "-")))
          .join(" "),
      )
      .join("; ");
    if (rows.find((r) => r.kid === first)?.state === "retired") break;
    await sleep(150);
  }
  assert.deepEqual(failures, []);
  assert.ok(second, "the schedule activated a second key");
  const signedBy = new Set(tokens.map((t) => t.kid));
  assert.ok(signedBy.has(first) && signedBy.has(second!), "tokens of both keys were verified");
  assert.ok(verified > tokens.length, `verified ${verified}`);
  t.diagnostic(
    `${tokens.length} tokens (${tokens.filter((x) => x.kid === first).length} by the first key), ${verified} verifications, 0 failed`,
  );

  // Retired: refused by VerifyJWT (key state is checked before expiry), by GetPublicKey, gone from the key set.
  await assert.rejects(
    s.identity.jwt.verify(firstToken!),
    (e: { reason?: string }) => e.reason === AuthReason.keyRetired,
  );
  await assert.rejects(
    s.identity.keys.publicKeyDer(first),
    (e: { reason?: string }) => e.reason === AuthReason.kidUnknown,
  );
  const set = await s.call("GET", "/.well-known/jwks.json");
  assert.ok(!set.json.keys.some((k: { kid: string }) => k.kid === first));
  assert.ok(s.logs.text.includes("signing key rotation step"));
});
