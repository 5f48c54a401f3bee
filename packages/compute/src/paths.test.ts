import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import { cleanMountPath, cleanWorkspacePath } from "./paths.ts";

const invalid = (fn: () => unknown) =>
  assert.throws(fn, (e: unknown) => e instanceof PlatformError && e.code === Code.InvalidArgument);

test("relative paths are cleaned lexically", () => {
  assert.equal(cleanWorkspacePath("a/b/../c", "/workspace"), "a/c");
  assert.equal(cleanWorkspacePath("./a//b/./", "/workspace"), "a/b");
  assert.equal(cleanWorkspacePath("", "/workspace"), "");
  assert.equal(cleanWorkspacePath(".", "/workspace"), "");
  assert.equal(cleanWorkspacePath("a/..", "/workspace"), "");
  assert.equal(cleanWorkspacePath("...", "/workspace"), "...");
  assert.equal(cleanWorkspacePath("..a/b", "/workspace"), "..a/b");
});

test("`..` remaining after cleaning is INVALID_ARGUMENT (path_escapes_mount)", () => {
  for (const p of ["..", "../x", "a/../../x", "./../", "a/b/../../../c"]) {
    assert.throws(
      () => cleanWorkspacePath(p, "/workspace"),
      (e: unknown) =>
        e instanceof PlatformError && e.code === Code.InvalidArgument && e.reason === ComputeReason.pathEscapes,
      p,
    );
  }
});

test("absolute paths must stay inside mount_path", () => {
  assert.equal(cleanWorkspacePath("/workspace/a/b", "/workspace"), "a/b");
  assert.equal(cleanWorkspacePath("/workspace", "/workspace"), "");
  assert.equal(cleanWorkspacePath("//workspace/./a/", "/workspace"), "a");
  assert.equal(cleanWorkspacePath("/workspace/x/../y", "/workspace"), "y");
  invalid(() => cleanWorkspacePath("/etc/passwd", "/workspace"));
  invalid(() => cleanWorkspacePath("/workspace/../etc", "/workspace"));
  invalid(() => cleanWorkspacePath("/workspacex/a", "/workspace"));
  invalid(() => cleanWorkspacePath("/", "/workspace"));
  assert.equal(cleanWorkspacePath("/home/me/w/a", "/home/me/w"), "a");
});

test("NUL bytes are rejected", () => {
  invalid(() => cleanWorkspacePath("a\0b", "/workspace"));
});

test("mount paths: absolute, cleaned, not over the sandbox's system root", () => {
  assert.equal(cleanMountPath("/workspace/"), "/workspace");
  assert.equal(cleanMountPath("/home/x/../w"), "/home/w");
  for (const p of ["relative", "/", "/usr", "/usr/local/x", "/proc", "/etc/x", "/tmp", "/../usr"])
    invalid(() => cleanMountPath(p));
});
