import assert from "node:assert/strict";
import { test } from "node:test";
import type { NodeRequest } from "@platform/rpc";
import { PasswordHasher } from "../passwords/password-hasher.ts";
import { loginShed } from "./login-shed.ts";

const request = (method: string) => ({ method }) as NodeRequest;

test("a login is refused before routing exactly while the hashing queue would refuse it", async () => {
  // One slot, no queue: one login in its credential check fills it.
  const hasher = new PasswordHasher({ memoryKiB: 1024, timeCost: 1, parallelism: 1, maxConcurrent: 1, maxQueue: 0 });
  const shed = loginShed(hasher);
  assert.equal(shed(request("POST"), "/v1/auth/login"), undefined, "an idle hasher refuses nothing");

  let release!: () => void;
  const inFlight = hasher.admit(() => new Promise<void>((r) => (release = r)));
  try {
    const refusal = shed(request("POST"), "/v1/auth/login");
    assert.ok(refusal, "a login while the queue is full is refused before routing");
    // The same answer the login itself gets from admit: 503 unavailable, Retry-After.
    const late = await hasher.admit(async () => "admitted").catch((e: unknown) => e);
    assert.ok(late instanceof Error);
    assert.deepEqual(
      { code: refusal.code, reason: refusal.reason, message: refusal.message, extra: refusal.extra },
      {
        code: (late as typeof refusal).code,
        reason: (late as typeof refusal).reason,
        message: late.message,
        extra: (late as typeof refusal).extra,
      },
    );
    assert.equal(refusal.extra.retry_after, "1");
    // Only logins: other routes and methods are the handlers' business.
    assert.equal(shed(request("GET"), "/v1/auth/login"), undefined);
    assert.equal(shed(request("POST"), "/v1/auth/refresh"), undefined);
    assert.equal(shed(request("POST"), "/v1/users/me"), undefined);
  } finally {
    release();
    await inFlight;
  }
  assert.equal(shed(request("POST"), "/v1/auth/login"), undefined, "refusals end with the load");
});
