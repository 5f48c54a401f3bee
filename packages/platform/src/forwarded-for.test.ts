// test-timeout: 400000
// Sign-ins through the router (the web console's one origin) are throttled per
// client address: the router sets X-Forwarded-For to the address it saw
// (replacing any the client sent) and identity believes it only on a
// connection from the router's address (LOGIN_TRUSTED_PROXIES, set as the
// launcher sets it). Clients on different loopback addresses (127.0.0.x: all
// of 127/8 is this machine's) stand in for different people.
import assert from "node:assert/strict";
import * as http from "node:http";
import { after, before, describe, test } from "node:test";
import { OWNER, type PlatformStack, startPlatform } from "./testing/platform-stack.ts";

/** A login POSTed to `base` from the local address `from`. */
function login(
  base: string,
  from: string,
  email: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; code?: string }> {
  const body = JSON.stringify({ email, password });
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}/v1/auth/login`,
      {
        method: "POST",
        localAddress: from,
        agent: false,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers },
      },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => {
          let code: string | undefined;
          try {
            code = (JSON.parse(text) as { code?: string }).code;
          } catch {}
          resolve({ status: res.statusCode ?? 0, code });
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("the login throttle behind the router", { timeout: 380_000 }, () => {
  let stack: PlatformStack;
  before(async () => {
    stack = await startPlatform({
      env: {
        LOGIN_THROTTLE_ADDRESS_FAILURES: "3",
        LOGIN_THROTTLE_ACCOUNT_FAILURES: "100000",
        // Long enough that a loaded machine cannot outwait a block between two attempts.
        LOGIN_THROTTLE_BASE_DELAY: "60s",
      },
    });
  });
  after(async () => {
    await stack?.stop();
  });

  /** Failing logins (a new email each) from `from` until the address is refused; the statuses seen. */
  async function exhaust(base: string, from: string, headers: () => Record<string, string> = () => ({})) {
    const seen: string[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await login(base, from, `guess-${from}-${i}@example.com`, "wrong-password", headers());
      seen.push(`${r.status}${r.code ? ` ${r.code}` : ""}`);
      if (r.status === 429) break;
    }
    return seen;
  }

  test("two client addresses through the router have buckets of their own; a forged X-Forwarded-For is replaced", async () => {
    const router = stack.endpoints.router;
    // The client's own X-Forwarded-For names a new address each time: the router replaces it.
    let n = 0;
    const forged = () => ({ "x-forwarded-for": `198.51.100.${++n}` });
    const first = await exhaust(router, "127.0.0.2", forged);
    assert.deepEqual(first.slice(0, 4), [
      "401 unauthenticated",
      "401 unauthenticated",
      "401 unauthenticated",
      "401 unauthenticated",
    ]);
    assert.equal(first.at(-1), "429 too_many_attempts", first.join(", "));
    // Even the right password waits at that address.
    assert.equal((await login(router, "127.0.0.2", OWNER.email, OWNER.password, forged())).status, 429);
    // Another person, through the same router: their own bucket.
    assert.equal((await login(router, "127.0.0.3", OWNER.email, OWNER.password)).status, 200);
    assert.equal((await login(router, "127.0.0.3", "someone@example.com", "wrong-password")).status, 401);
  });

  test("straight to identity from an address it does not trust, X-Forwarded-For is ignored", async () => {
    const identity = stack.endpoints.identity;
    let n = 0;
    const rotating = () => ({ "x-forwarded-for": `203.0.113.${++n}` });
    const seen = await exhaust(identity, "127.0.0.4", rotating);
    assert.equal(seen.at(-1), "429 too_many_attempts", seen.join(", "));
    assert.equal(seen.length, 5, seen.join(", "));
    // The router (a trusted address) is still believed for others.
    assert.equal((await login(stack.endpoints.router, "127.0.0.5", OWNER.email, OWNER.password)).status, 200);
  });
});
