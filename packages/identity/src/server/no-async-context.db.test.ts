// Identity serves without AsyncLocalStorage (rpc ServerOptions.asyncRequestContext:
// false): on Node 20 one store entered turns on promise hooks for the whole
// process, a callback on every promise and nextTick of every VerifyToken.
// The request's ids and caller reach the handlers through the call's context.
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { after, before, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { type TestServer, startTestServer } from "../testing/server.ts";

let entered = 0;
const run = AsyncLocalStorage.prototype.run;
const enterWith = AsyncLocalStorage.prototype.enterWith;
AsyncLocalStorage.prototype.run = function (this: AsyncLocalStorage<unknown>, ...args: Parameters<typeof run>) {
  entered++;
  return run.apply(this, args) as never;
};
AsyncLocalStorage.prototype.enterWith = function (this: AsyncLocalStorage<unknown>, store: unknown) {
  entered++;
  enterWith.call(this, store);
};

let s: TestServer;
before(async () => {
  s = await startTestServer();
});
after(() => s.close());

test("REST and gRPC calls are served without entering an AsyncLocalStorage, with their ids and caller", async () => {
  const before = entered;
  const pair = await s.login();
  // The internal port lets only IDENTITY_CALLERS call: the caller from the certificate reached the check.
  const grpc = createClient(AuthService, s.grpcTransport("agents"));
  const ctx = (
    await grpc.verifyToken({ token: `Bearer ${pair.access_token}` }, { headers: { "x-request-id": "verify-1" } })
  ).context;
  assert.ok(ctx?.userId);
  const refused = await grpc.verifyToken({ token: "Bearer nope" }, { headers: { "x-request-id": "verify-2" } }).then(
    () => "accepted",
    () => "refused",
  );
  assert.equal(refused, "refused");
  assert.equal(entered - before, 0);
  // The access lines still name the requests.
  await new Promise((r) => setTimeout(r, 50));
  const ids = s.logs.lines.map((l) => (JSON.parse(l) as { requestId?: string }).requestId);
  assert.ok(ids.includes("verify-1") && ids.includes("verify-2"));
});
