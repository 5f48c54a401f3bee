import assert from "node:assert/strict";
import { test } from "node:test";
import { Code as ConnectCode } from "@connectrpc/connect";
import { Code, codeName, httpStatusOf } from "./code.ts";
import { PlatformError } from "./platform-error.ts";
import { file_compute_v1_compute } from "@platform/gen/compute/v1/compute_pb";

test("codes have Connect's numbers", () => {
  for (const [name, value] of Object.entries(ConnectCode)) {
    if (typeof value === "number") assert.equal((Code as Record<string, unknown>)[name], value, name);
  }
});

test("http statuses follow the Connect table", () => {
  assert.equal(httpStatusOf(Code.InvalidArgument), 400);
  assert.equal(httpStatusOf(Code.FailedPrecondition), 400);
  assert.equal(httpStatusOf(Code.Unauthenticated), 401);
  assert.equal(httpStatusOf(Code.PermissionDenied), 403);
  assert.equal(httpStatusOf(Code.NotFound), 404);
  assert.equal(httpStatusOf(Code.AlreadyExists), 409);
  assert.equal(httpStatusOf(Code.Aborted), 409);
  assert.equal(httpStatusOf(Code.ResourceExhausted), 429);
  assert.equal(httpStatusOf(Code.Unavailable), 503);
  assert.equal(httpStatusOf(Code.DeadlineExceeded), 504);
  assert.equal(httpStatusOf(Code.Internal), 500);
  assert.equal(codeName(Code.InvalidArgument), "invalid_argument");
  assert.equal(codeName(Code.AlreadyExists), "already_exists");
});

test("from() hides unknown errors behind internal", () => {
  const e = PlatformError.from(new Error("select * from secrets"));
  assert.equal(e.code, Code.Internal);
  assert.equal(e.message, "internal error");
  const p = PlatformError.notFound("nope");
  assert.equal(PlatformError.from(p), p);
  assert.ok(file_compute_v1_compute.services.length === 1);
});
