import assert from "node:assert/strict";
import { test } from "node:test";
import { readSse } from "./sse-reader.ts";

async function parse(...chunks: string[]) {
  async function* body() {
    for (const c of chunks) yield new TextEncoder().encode(c);
  }
  const out = [];
  for await (const e of readSse(body())) out.push(e);
  return out;
}

test("events split across chunks, with names, comments and multi-line data", async () => {
  assert.deepEqual(await parse("event: a\nda", "ta: 1\n\n: ping\n\ndata: x\ndata: y\n\n"), [
    { event: "a", data: "1" },
    { event: "message", data: "x\ny" },
  ]);
});

test("CRLF and CR line ends, a CRLF split between chunks, and a last event without a blank line", async () => {
  assert.deepEqual(await parse("data: a\r", "\n\r\ndata: b\r\rdata: c"), [
    { event: "message", data: "a" },
    { event: "message", data: "b" },
    { event: "message", data: "c" },
  ]);
});

test("multi-byte characters split between chunks", async () => {
  const bytes = new TextEncoder().encode("data: héllo\n\n");
  async function* body() {
    yield bytes.subarray(0, 8);
    yield bytes.subarray(8);
  }
  const out = [];
  for await (const e of readSse(body())) out.push(e);
  assert.deepEqual(out, [{ event: "message", data: "héllo" }]);
});
