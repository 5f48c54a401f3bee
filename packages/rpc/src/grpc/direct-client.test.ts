import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";
import { LibraryService } from "@platform/gen/rpctest/v1/rpctest_pb";
import { createServiceTransport } from "../client.ts";
import { testServer } from "../testing/fixture.ts";

// Unary calls of `direct` methods written and read by grpc/direct-client.ts
// (compute's file calls from agents): the same answers, errors, deadline,
// cancellation and interceptors as through Connect's client.
describe("createServiceTransport with direct methods", () => {
  const { server, probe } = testServer({ bodyLimitBytes: 32 << 20 });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  const m = LibraryService.method;
  const direct = [m.putBlob, m.getBlob, m.getShelf, m.sleep, m.echo];
  const seen: string[] = [];
  const recorder: Interceptor = (next) => async (req) => {
    seen.push(req.method.name);
    req.header.set("x-custom", "from-interceptor");
    return next(req);
  };
  const client = () =>
    createClient(LibraryService, createServiceTransport({ baseUrl: url, direct, interceptors: [recorder] }));
  const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

  test("16 MiB each way: the large field goes out and comes back whole", async () => {
    const c = client();
    const data = randomBytes(16 << 20);
    const put = await c.putBlob({ name: "n", data, append: true, mode: 0o644 });
    assert.equal(put.size, BigInt(data.length));
    assert.equal(put.sha256, sha(data));
    assert.equal(put.append, true);
    assert.equal(put.mode, 0o644);
    // data is field 1 of GetBlobResponse: the server writes it after the others (spliced, any order).
    const got = await c.getBlob({ name: "g", size: BigInt(16 << 20) });
    assert.equal(got.data.length, 16 << 20);
    for (let i = 0; i < got.data.length; i += 4099) assert.equal(got.data[i], i % 251);
    assert.equal(got.totalSize, 32n << 20n);
    assert.equal(got.label, "blob g é\n");
    // Small messages and empty ones too, and the other methods through Connect's client as before.
    assert.equal((await c.putBlob({ name: "e" })).sha256, sha(new Uint8Array(0)));
    assert.equal((await c.getBlob({ name: "z" })).eof, true);
    assert.deepEqual((await c.listTags({ tags: ["a"] })).tags, ["a"]);
  });

  test("the transport's interceptors run, and their headers reach the server", async () => {
    seen.length = 0;
    const r = await client().echo({ text: "hi" });
    assert.deepEqual(seen, ["Echo"]);
    assert.equal(r.headers["x-custom"], "from-interceptor");
  });

  test("a handler's error arrives with its code, message and details", async () => {
    const err = await client()
      .getShelf({ shelf: 404n })
      .then(
        () => assert.fail("no error"),
        (e: unknown) => ConnectError.from(e),
      );
    assert.equal(err.code, Code.NotFound);
    assert.equal(err.rawMessage, "shelf not found");
    assert.equal(err.findDetails(ErrorInfoSchema)[0]?.reason, "shelf_missing");
    const bad = await client()
      .getBlob({ name: "x", size: -1n })
      .catch((e: unknown) => ConnectError.from(e));
    assert.equal((bad as ConnectError).code, Code.InvalidArgument);
  });

  test("a deadline ends the call as deadline_exceeded, an abort as canceled; the handler sees both", async () => {
    const c = client();
    const slow = await c.sleep({ ms: 30_000n }, { timeoutMs: 200 }).catch((e: unknown) => ConnectError.from(e));
    assert.equal((slow as ConnectError).code, Code.DeadlineExceeded);
    assert.equal(await probe.nextAbort(), "sleep");
    const abort = new AbortController();
    const pending = c.sleep({ ms: 30_000n }, { signal: abort.signal }).catch((e: unknown) => ConnectError.from(e));
    setTimeout(() => abort.abort(), 200);
    assert.equal(((await pending) as ConnectError).code, Code.Canceled);
    assert.equal(await probe.nextAbort(), "sleep");
  });

  test("an answer over readMaxBytes is resource_exhausted; an unreachable server unavailable", async () => {
    const small = createClient(LibraryService, createServiceTransport({ baseUrl: url, direct, readMaxBytes: 1000 }));
    const big = await small.getBlob({ name: "b", size: 5000n }).catch((e: unknown) => ConnectError.from(e));
    assert.equal((big as ConnectError).code, Code.ResourceExhausted);
    assert.equal((await small.getBlob({ name: "b", size: 10n })).data.length, 10);
    const nowhere = createClient(LibraryService, createServiceTransport({ baseUrl: "http://127.0.0.1:1", direct }));
    const down = await nowhere.getBlob({ name: "b" }).catch((e: unknown) => ConnectError.from(e));
    assert.equal((down as ConnectError).code, Code.Unavailable);
  });
});
