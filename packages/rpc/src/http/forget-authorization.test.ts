import assert from "node:assert/strict";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { forgetAuthorization } from "./node-io.ts";

// An open SSE stream's request lives as long as the stream: the credential
// is dropped from it once the call started, and what stays should be small.

setFlagsFromString("--allow-natives-syntax");
const hasFastProperties = new Function("o", "return %HasFastProperties(o)") as (o: object) => boolean;

test("forgetAuthorization drops the credential from an HTTP/1.1 request's headers and raw lines, keeps the rest, and leaves no dictionary", async () => {
  let seen: { headers: http.IncomingHttpHeaders; raw: string[]; fast: boolean } | undefined;
  const server = http.createServer((req, res) => {
    forgetAuthorization(req);
    seen = { headers: { ...req.headers }, raw: [...req.rawHeaders], fast: hasFastProperties(req.headers) };
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((resolve, reject) => {
      http
        .get(
          { port, host: "127.0.0.1", path: "/", headers: { Authorization: "Bearer secret-token", "x-probe": "kept" } },
          (res) => {
            res.resume();
            res.on("end", resolve);
          },
        )
        .on("error", reject);
    });
    assert.ok(seen);
    assert.equal(seen.headers.authorization, undefined);
    assert.equal(seen.headers["x-probe"], "kept");
    assert.ok(!seen.raw.some((v) => /secret-token|^authorization$/i.test(v)), `raw lines: ${seen.raw.join(", ")}`);
    assert.ok(seen.raw.includes("kept"));
    assert.equal(seen.fast, true, "the headers object is not in dictionary mode");
  } finally {
    server.close();
  }
});
