import assert from "node:assert/strict";
import { test } from "node:test";
import { createTestDatabase } from "@platform/db/testing";
import { startBareLogin } from "./bare-login.ts";

const account = { email: "Floor@Example.com", password: "floor-password-1" };

// The login figure's floor does a login's whole work: a wrong password is refused only after
// the hash, a right one gets identity's answer shape with a signed token and a stored refresh token.
test("the bare login floor answers as identity's login does", { timeout: 60_000 }, async () => {
  const database = await createTestDatabase<unknown>();
  const floor = await startBareLogin("127.0.0.1", account, database.url);
  try {
    const post = (body: string) =>
      fetch(`${floor.url}/v1/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body });
    const ok = await post(JSON.stringify({ email: "floor@example.com", password: account.password }));
    assert.equal(ok.status, 200);
    const pair = (await ok.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(pair).sort(), ["access_token", "expires_in", "refresh_token", "token_type"]);
    const [header, claims, signature] = String(pair.access_token).split(".");
    assert.equal(JSON.parse(Buffer.from(header!, "base64url").toString()).alg, "RS256");
    assert.equal(typeof JSON.parse(Buffer.from(claims!, "base64url").toString()).sub, "string");
    assert.equal(Buffer.from(signature!, "base64url").length, 256, "an RSA-2048 signature");
    assert.match(String(pair.refresh_token), /^rt_/);
    const wrong = await post(JSON.stringify({ email: account.email, password: "not-the-password" }));
    assert.equal(wrong.status, 401);
    assert.equal((await post("{")).status, 400);
    if (database.url) {
      const rows = await database.run!<{ n: number }>("select count(*)::int as n from floor_refresh_tokens", []);
      assert.equal(rows[0]!.n, 1, "one refresh token stored for the one login");
    }
  } finally {
    await floor.close();
    await database.close();
  }
});
