import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code as ConnectCode, ConnectError } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";
import { errorFromResponse, toPlatformError } from "./errors.ts";

const json = (v: unknown) => JSON.stringify(v);

test("identity's envelope: the code is the reason, extra fields ride along", () => {
  const e = toPlatformError(
    errorFromResponse(
      401,
      new Headers(),
      json({ code: "refresh_token_reused", message: "token reused", action: "re_authenticate" }),
    ),
  );
  assert.ok(e instanceof PlatformError);
  assert.equal(e.code, Code.Unauthenticated);
  assert.equal(e.reason, "refresh_token_reused");
  assert.equal(e.message, "token reused");
  assert.deepEqual(e.extra, { action: "re_authenticate" });
  assert.equal(e.httpStatus, 401);
});

test("agents' envelope: the code name gives the code; a reason beside it wins", () => {
  const notFound = toPlatformError(
    errorFromResponse(404, new Headers(), json({ error: { code: "not_found", message: "agent not found" } })),
  );
  assert.equal(notFound.code, Code.NotFound);
  assert.equal(notFound.reason, "not_found");
  assert.equal(notFound.httpStatus, 404);
  const busy = toPlatformError(
    errorFromResponse(409, new Headers(), json({ error: { code: "aborted", message: "busy" } })),
  );
  assert.equal(busy.code, Code.Aborted);
  const scope = toPlatformError(
    errorFromResponse(
      403,
      new Headers(),
      json({ error: { code: "permission_denied", reason: "insufficient_scope", message: "needs agents:write" } }),
    ),
  );
  assert.equal(scope.code, Code.PermissionDenied);
  assert.equal(scope.reason, "insufficient_scope");
});

test("Retry-After and a body that is not JSON", () => {
  const e = toPlatformError(errorFromResponse(503, new Headers({ "retry-after": "5" }), "<html>bad gateway</html>"));
  assert.equal(e.code, Code.Unavailable);
  assert.equal(e.reason, "http_503");
  assert.equal(e.extra.retry_after, "5");
});

test("a ConnectError as a service sends it on gRPC: ErrorInfo reason and metadata", () => {
  const ce = new ConnectError("Conflict", ConnectCode.Aborted, new Headers({ "retry-after": "2" }), [
    {
      desc: ErrorInfoSchema,
      value: create(ErrorInfoSchema, {
        reason: "tool_calls_pending",
        domain: "platform",
        metadata: { activeRunId: "r1", http_status: "409" },
      }),
    },
  ]);
  const e = toPlatformError(ce);
  assert.equal(e.code, Code.Aborted);
  assert.equal(e.reason, "tool_calls_pending");
  assert.deepEqual(e.extra, { activeRunId: "r1", retry_after: "2" });
  assert.equal(e.httpStatus, 409);
  assert.equal(e.message, "Conflict");
  // Without ErrorInfo: the code's name.
  assert.equal(toPlatformError(new ConnectError("x", ConnectCode.NotFound)).reason, "not_found");
  const p = PlatformError.notFound("gone");
  assert.equal(toPlatformError(p), p);
});
