import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { decodeCursor, encodeCursor } from "./cursor.ts";
import { listLimit, requireUuid, validateDecisions, validateMessages, validateToolPermissions } from "./validate.ts";

const invalid = (fn: () => unknown, pattern?: RegExp) =>
  assert.throws(
    fn,
    (err: unknown) =>
      err instanceof PlatformError && err.code === Code.InvalidArgument && (!pattern || pattern.test(err.message)),
  );

test("limit: default 20, 1..100 allowed, anything else invalid", () => {
  assert.equal(listLimit(undefined), 20);
  assert.equal(listLimit(1), 1);
  assert.equal(listLimit(100), 100);
  for (const bad of [0, -1, 101, 1.5, Number.NaN]) invalid(() => listLimit(bad), /limit/);
});

test("uuid: required and well-formed, normalized to lower case", () => {
  assert.equal(requireUuid("id", "0A1B2C3D-0000-4000-8000-000000000000"), "0a1b2c3d-0000-4000-8000-000000000000");
  invalid(() => requireUuid("id", ""), /required/);
  invalid(() => requireUuid("id", "0a1b2c3d-0000-4000-8000-00000000000"), /UUID/);
  invalid(() => requireUuid("id", "../etc/passwd"), /UUID/);
});

test("cursor: round-trips, is opaque, rejects garbage", () => {
  assert.equal(decodeCursor(encodeCursor(12345)), 12345);
  assert.doesNotMatch(encodeCursor(7), /7$/);
  for (const bad of [
    "",
    "abc",
    "!!!",
    Buffer.from("a1:-5").toString("base64url"),
    Buffer.from("zz:10").toString("base64url"),
  ]) {
    invalid(() => decodeCursor(bad), /cursor/);
  }
});

test("messages: non-empty, known roles, toolUseId exactly for tool, isError only for tool", () => {
  const m = (role: string, content = "x", toolUseId = "", isError = false) => ({ role, content, toolUseId, isError });
  validateMessages([m("user"), m("assistant"), m("tool", "", "t1", true)]);
  invalid(() => validateMessages([]), /empty/);
  invalid(() => validateMessages([m("system")]), /role/);
  invalid(() => validateMessages([m("tool")]), /toolUseId/);
  invalid(() => validateMessages([m("user", "x", "t")]), /toolUseId/);
  invalid(() => validateMessages([m("user", "x", "", true)]), /isError/);
  invalid(() => validateMessages([m("user", "  ")]), /content/);
  invalid(() => validateMessages(Array.from({ length: 101 }, () => m("user"))), /at most/);
});

test("toolPermissions: allow/ask only, names bounded, at most 64 entries; the refusal names the entry", () => {
  assert.deepEqual(validateToolPermissions({ bash: "ask", "docs.search": "allow" }), {
    bash: "ask",
    "docs.search": "allow",
  });
  invalid(() => validateToolPermissions({ bash: "deny" }), /toolPermissions\["bash"\] must be "allow" or "ask"/);
  invalid(() => validateToolPermissions({ "": "ask" }), /toolPermissions\[""\]/);
  invalid(() => validateToolPermissions({ "a b": "ask" }), /toolPermissions\["a b"\]/);
  invalid(() => validateToolPermissions({ ["x".repeat(129)]: "ask" }), /1 to 128 characters/);
  assert.doesNotThrow(() => validateToolPermissions({ ["x".repeat(128)]: "ask" }));
  const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`t${i}`, "ask"]));
  invalid(() => validateToolPermissions(many), /more than 64 entries/);
});

test("decisions: at least one, allow/deny, each call once, message bounded", () => {
  assert.deepEqual(validateDecisions([{ toolUseId: "a", decision: "deny", message: "no" }]), [
    { toolUseId: "a", decision: "deny", message: "no" },
  ]);
  invalid(() => validateDecisions([]), /decisions is required/);
  invalid(() => validateDecisions([{ toolUseId: "", decision: "allow", message: "" }]), /toolUseId is required/);
  invalid(() => validateDecisions([{ toolUseId: "a", decision: "maybe", message: "" }]), /"allow" or "deny"/);
  invalid(
    () =>
      validateDecisions([
        { toolUseId: "a", decision: "allow", message: "" },
        { toolUseId: "a", decision: "deny", message: "" },
      ]),
    /answered twice/,
  );
  invalid(() => validateDecisions([{ toolUseId: "a", decision: "deny", message: "m".repeat(4097) }]), /4096/);
});
