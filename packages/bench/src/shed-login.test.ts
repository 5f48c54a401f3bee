import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { HttpLoadClient } from "./http-load-client.ts";
import { shedAwareLogin } from "./shed-login.ts";

test("a login shed with 503 + Retry-After is waited out and counted, not a failure; other errors still fail", async () => {
  const answers = [
    [503, { code: "unavailable", retry_after: "0.2" }],
    [200, { access_token: "t" }],
    [500, { code: "internal" }],
  ] as const;
  let n = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    const [status, body] = answers[n++]!;
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const client = new HttpLoadClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 1);
  try {
    const shed = { windows: 0, burst: 0 };
    const login = shedAwareLogin(client, { email: "a@b.c", password: "p" }, shed, "windows", 8);
    const t0 = performance.now();
    await login();
    assert.ok(performance.now() - t0 >= 190, "waited as Retry-After told");
    assert.deepEqual(shed, { windows: 1, burst: 0 });
    await login();
    assert.deepEqual(shed, { windows: 1, burst: 0 }, "a 200 is not counted as shed");
    await assert.rejects(login(), /login: 500/);
  } finally {
    client.close();
    server.close();
  }
});
