import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { testServer } from "../testing/fixture.ts";

// `(platform.api.v1.raw_bytes)`: a bytes field carried as the raw HTTP body
// (rpctest PutBlob, GetBlob), JSON staying the default both ways.
describe("REST raw_bytes", () => {
  const { server } = testServer({ bodyLimitBytes: 4 << 20 });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
  const put = (query: string, body: Uint8Array | string, type = "application/octet-stream") =>
    fetch(`${url}/v1/blobs/b1:put${query}`, { method: "POST", body, headers: { "content-type": type } });

  test("an application/octet-stream body is the field, the query the other fields", async () => {
    for (const size of [0, 1, 70_000, 3 << 20]) {
      const data = randomBytes(size);
      const r = await put("?append=true&mode=420", data);
      assert.equal(r.status, 200, await r.clone().text());
      assert.deepEqual(await r.json(), {
        name: "b1",
        ...(size > 0 ? { size } : {}),
        sha256: sha(data),
        append: true,
        mode: 420,
      });
    }
    // The proto name binds as well as the JSON name; no query at all is the defaults.
    const plain = await put("", Buffer.from("abc"));
    assert.deepEqual(await plain.json(), { name: "b1", size: 3, sha256: sha(Buffer.from("abc")) });
  });

  test("a JSON body is read as before, base64 data and all", async () => {
    const data = randomBytes(1000);
    const r = await put("", JSON.stringify({ data: data.toString("base64"), mode: 7 }), "application/json");
    assert.deepEqual(await r.json(), { name: "b1", size: 1000, sha256: sha(data), mode: 7 });
    // Query parameters stay refused beside a JSON body (body "*" binds every field).
    const q = await put("?mode=7", JSON.stringify({}), "application/json");
    assert.equal(q.status, 400);
  });

  test("what the query cannot bind is 400 invalid_argument, before the handler", async () => {
    for (const query of ["?nope=1", "?name=other", "?data=AAAA", "?mode=x", "?mode=1&mode=2", "?append=maybe"]) {
      const r = await put(query, Buffer.from("x"));
      assert.equal(r.status, 400, query);
      assert.equal(((await r.json()) as { error: { code: string } }).error.code, "invalid_argument", query);
    }
  });

  test("a raw body over the method's limit is 413; an octet-stream body where there is no raw_bytes is 415", async () => {
    const big = await put("", Buffer.alloc((4 << 20) + 1));
    assert.equal(big.status, 413);
    const other = await fetch(`${url}/v1/shelves/1/books`, {
      method: "POST",
      body: Buffer.from("{}"),
      headers: { "content-type": "application/octet-stream" },
    });
    assert.equal(other.status, 415);
  });

  const get = (query: string, accept?: string) =>
    fetch(`${url}/v1/blobs/b2${query}`, { headers: accept ? { accept } : {} });

  test("Accept: application/octet-stream answers the field as the body, the other fields as headers", async () => {
    for (const size of [0, 5, 100_000]) {
      const r = await get(`?size=${size}`, "application/json, application/octet-stream");
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("content-type"), "application/octet-stream");
      assert.equal(r.headers.get("vary"), "accept");
      const body = Buffer.from(await r.arrayBuffer());
      assert.equal(body.length, size);
      for (let i = 0; i < size; i++) if (body[i] !== i % 251) assert.fail(`byte ${i}`);
      assert.equal(r.headers.get("x-total-size"), String(size * 2));
      assert.equal(r.headers.get("x-eof"), String(size === 0));
      // A string is its JSON text, non-ASCII escaped (a header carries Latin-1 only).
      assert.equal(r.headers.get("x-label"), '"blob b2 \\u00e9\\n"');
      assert.equal(JSON.parse(r.headers.get("x-label")!), "blob b2 é\n");
    }
  });

  test("without Accept naming it (or with q=0) the answer is JSON; errors are JSON either way", async () => {
    for (const accept of [undefined, "*/*", "application/json", "application/octet-stream;q=0", "application/*"]) {
      const r = await get("?size=3", accept);
      assert.equal(r.headers.get("content-type"), "application/json", String(accept));
      assert.equal(r.headers.get("vary"), "accept");
      assert.deepEqual(await r.json(), { data: "AAEC", totalSize: 6, label: "blob b2 é\n" });
    }
    const bad = await get("?size=-1", "application/octet-stream");
    assert.equal(bad.status, 400);
    assert.match(bad.headers.get("content-type") ?? "", /^application\/json/);
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, "invalid_argument");
    // Other routes ignore the Accept header.
    const shelf = await fetch(`${url}/v1/shelves/12`, { headers: { accept: "application/octet-stream" } });
    assert.equal(shelf.headers.get("content-type"), "application/json");
    assert.equal(shelf.headers.get("vary"), null);
  });
});
