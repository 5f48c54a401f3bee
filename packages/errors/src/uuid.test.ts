import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, isUuid, PlatformError, requireUuid } from "./index.ts";

test("isUuid: the 8-4-4-4-12 hex form of any version, either case; nothing else", () => {
  for (const ok of [
    "0a1b2c3d-0000-4000-8000-000000000000",
    "0A1B2C3D-0000-4000-8000-00000000000F",
    "00000000-0000-0000-0000-000000000000",
  ]) {
    assert.equal(isUuid(ok), true, ok);
  }
  for (const bad of [
    "",
    "0a1b2c3d-0000-4000-8000-00000000000",
    "0a1b2c3d00004000800000000000000000",
    "../etc/passwd",
    "0a1b2c3d-0000-4000-8000-00000000000g",
    " 0a1b2c3d-0000-4000-8000-000000000000",
  ]) {
    assert.equal(isUuid(bad), false, bad);
  }
});

test("requireUuid: the id lower-cased, else INVALID_ARGUMENT naming the field, with the contract's reason", () => {
  assert.equal(requireUuid("id", "0A1B2C3D-0000-4000-8000-000000000000"), "0a1b2c3d-0000-4000-8000-000000000000");
  const failure = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      assert.ok(e instanceof PlatformError);
      return e;
    }
    assert.fail("expected an error");
  };
  const empty = failure(() => requireUuid("session_id", ""));
  assert.equal(empty.code, Code.InvalidArgument);
  assert.equal(empty.message, "session_id is required");
  assert.equal(empty.reason, "invalid_argument");
  const bad = failure(() => requireUuid("sandbox_id", "nope", "user_id_invalid"));
  assert.equal(bad.message, "sandbox_id must be a UUID");
  assert.equal(bad.reason, "user_id_invalid");
});
