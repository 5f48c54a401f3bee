import assert from "node:assert/strict";
import { test } from "node:test";
import { PlatformError } from "@platform/errors";
import { cleanSessionFilePath, cleanSessionPath } from "./workspace-path.ts";

function refusal(fn: () => unknown): { code: string; reason: string } {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof PlatformError);
    return { code: err.codeName, reason: err.reason };
  }
  assert.fail("not refused");
}

test("paths inside the workspace are cleaned to a relative path", () => {
  assert.equal(cleanSessionPath(""), "");
  assert.equal(cleanSessionPath("."), "");
  assert.equal(cleanSessionPath("/workspace"), "");
  assert.equal(cleanSessionPath("/workspace/"), "");
  assert.equal(cleanSessionPath("a/b/../c/"), "a/c");
  assert.equal(cleanSessionPath("./a//b"), "a/b");
  assert.equal(cleanSessionPath("/workspace/a/../b"), "b");
  assert.equal(cleanSessionPath("a/.."), "");
  assert.equal(cleanSessionPath("..a/b"), "..a/b");
});

test("paths that leave the workspace are invalid_argument with compute's reasons", () => {
  for (const bad of ["..", "../x", "a/../../x", "/etc/passwd", "/workspace/../etc", "/workspacex/a", "/"]) {
    assert.deepEqual(
      refusal(() => cleanSessionPath(bad)),
      { code: "invalid_argument", reason: "path_escapes_mount" },
      bad,
    );
  }
  assert.deepEqual(
    refusal(() => cleanSessionPath("a".repeat(256))),
    { code: "invalid_argument", reason: "path_too_long" },
  );
  assert.deepEqual(
    refusal(() => cleanSessionPath(`${"a/".repeat(2100)}x`)),
    { code: "invalid_argument", reason: "path_too_long" },
  );
  assert.equal(cleanSessionPath("é".repeat(127)), "é".repeat(127));
  assert.deepEqual(
    refusal(() => cleanSessionPath("é".repeat(128))),
    { code: "invalid_argument", reason: "path_too_long" },
  );
});

test("a file path must name a file, not the workspace", () => {
  assert.equal(cleanSessionFilePath("/workspace/x.txt"), "x.txt");
  for (const bad of ["", ".", "/workspace", "a/.."])
    assert.equal(refusal(() => cleanSessionFilePath(bad)).code, "invalid_argument", bad);
});
