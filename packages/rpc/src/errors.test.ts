import assert from "node:assert/strict";
import { test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { boundConnectError, boundPlatformError } from "./error-bounds.ts";
import { fromConnectError, toConnectError } from "./errors.ts";

// REST renders the PlatformError a handler raised (bounded) where it used to
// render the one read back out of the gRPC status: both must be the same.
test("boundPlatformError is what a PlatformError reads as after the bounded gRPC round trip", () => {
  const many = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`k${i}`, `v${i}`]));
  const cases: PlatformError[] = [
    PlatformError.notFound("no such shelf", "shelf_missing"),
    new PlatformError(
      Code.FailedPrecondition,
      "sandbox_not_runnable",
      "é".repeat(700),
      { state: "FAILED" },
      { httpStatus: 409 },
    ),
    new PlatformError(Code.InvalidArgument, "bad", "m", many, { httpStatus: 422 }),
    new PlatformError(Code.InvalidArgument, "bad", "m", { ...many, k0: "x".repeat(300) }),
    new PlatformError(Code.InvalidArgument, "bad", "m", { ["k".repeat(100)]: "v", ["k".repeat(101)]: "w" }),
    new PlatformError(Code.Unavailable, "busy", "m", { retry_after: "7" }, { httpStatus: 700 }),
    new PlatformError(Code.PermissionDenied, "", "no reason", { http_status: "418" }),
    PlatformError.internal("driver said: select * from secrets"),
  ];
  for (const p of cases) {
    const direct = boundPlatformError(p);
    const roundTrip = fromConnectError(boundConnectError(toConnectError(p)));
    assert.deepEqual(
      {
        code: direct.code,
        reason: direct.reason,
        message: direct.message,
        extra: direct.extra,
        httpStatus: direct.httpStatus,
      },
      {
        code: roundTrip.code,
        reason: roundTrip.reason,
        message: roundTrip.message,
        extra: roundTrip.extra,
        httpStatus: roundTrip.httpStatus,
      },
      p.message.slice(0, 40),
    );
  }
  const plain = PlatformError.notFound("x");
  assert.equal(boundPlatformError(plain), plain, "nothing to cut: the same error");
});
