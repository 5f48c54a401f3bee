import assert from "node:assert/strict";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { forgetSentHeaders } from "./node-io.ts";

test("an open response whose head was sent lets go of its header map; the client got every header, and the body goes on", async () => {
  let names: string[][] = [];
  const server = http.createServer((_req, res) => {
    res.setHeader("x-request-id", "r1");
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.flushHeaders();
    names.push(res.getHeaderNames());
    forgetSentHeaders(res);
    names.push(res.getHeaderNames());
    res.write("data: 1\n\n");
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(res.headers.get("x-request-id"), "r1");
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    assert.equal(await res.text(), "data: 1\n\n");
    assert.deepEqual(names, [["x-request-id", "content-type"], []]);
  } finally {
    server.close();
  }
});

test("a response whose head is not sent yet keeps its headers", () => {
  const res = new http.ServerResponse(new http.IncomingMessage(null as never));
  res.setHeader("x-a", "1");
  forgetSentHeaders(res);
  assert.equal(res.getHeader("x-a"), "1");
});
