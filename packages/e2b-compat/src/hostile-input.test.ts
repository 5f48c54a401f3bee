// test-timeout: 180000
// Malformed and oversized requests to the e2b service's control plane and
// envd routes: each answers a 4xx with E2B's {code, message}, never a 500.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type E2bStack, startE2bStack } from "./testing/e2b-stack.ts";

let stack: E2bStack;
let key: string;

before(async () => {
  stack = await startE2bStack("hostile");
  key = stack.identity.apiKey(["sessions:run"]).token;
});

after(async () => {
  await stack?.close();
});

async function call(path: string, init: RequestInit & { headers?: Record<string, string> } = {}) {
  const res = await fetch(`${stack.compat.url}${path}`, {
    ...init,
    headers: { "x-api-key": key, "content-type": "application/json", ...init.headers },
  });
  const text = await res.text();
  return { status: res.status, text };
}

test("control plane: bad JSON, bad fields, oversized bodies, odd ids and routes are 4xx", async () => {
  const cases: [string, RequestInit & { headers?: Record<string, string> }, number][] = [
    ["/v2/sandboxes", { method: "POST", body: "not json" }, 400],
    ["/v2/sandboxes", { method: "POST", body: "[1,2]" }, 400],
    ["/v2/sandboxes", { method: "POST", body: '{"timeout": -1}' }, 400],
    ["/v2/sandboxes", { method: "POST", body: '{"timeout": "60"}' }, 400],
    ["/v2/sandboxes", { method: "POST", body: '{"timeout": 1e12}' }, 400],
    ["/v2/sandboxes", { method: "POST", body: '{"metadata": {"a": 1}}' }, 400],
    ["/v2/sandboxes", { method: "POST", body: '{"envVars": "x"}' }, 400],
    ["/v2/sandboxes", { method: "POST", body: '{"templateID": 7}' }, 400],
    ["/v2/sandboxes", { method: "POST", body: '{"allow_internet_access": "yes"}' }, 400],
    ["/v2/sandboxes", { method: "POST", body: JSON.stringify({ metadata: { k: "x".repeat(70_000) } }) }, 413],
    [`/sandboxes/${"a".repeat(2000)}`, { method: "GET" }, 404],
    ["/sandboxes/%00", { method: "DELETE" }, 404],
    ["/sandboxes/x/timeout", { method: "POST", body: "{}" }, 404],
    ["/no/such/route", { method: "GET" }, 404],
    ["/readyz", { method: "GET", headers: { "x-api-key": "" } }, 200],
    ["/v2/sandboxes", { method: "POST", body: "{}", headers: { "x-api-key": "" } }, 401],
    ["/v2/sandboxes", { method: "POST", body: "{}", headers: { "x-api-key": "Bearer x y z" } }, 401],
  ];
  for (const [path, init, status] of cases) {
    const r = await call(path, init);
    assert.equal(r.status, status, `${init.method} ${path.slice(0, 40)} ${String(init.body).slice(0, 40)}: ${r.text}`);
    if (status === 200) continue;
    const body = JSON.parse(r.text) as { code: number; message: string };
    assert.equal(body.code, status);
    assert.equal(typeof body.message, "string");
  }
});

test("envd: unknown sandbox, a NUL in a path, a path outside the workspace, a declared oversized upload, garbage Connect JSON", async () => {
  const created = await call("/v2/sandboxes", { method: "POST", body: '{"timeout": 60}' });
  assert.equal(created.status, 201, created.text);
  const { sandboxID, envdAccessToken } = JSON.parse(created.text) as { sandboxID: string; envdAccessToken: string };
  const envd = { "e2b-sandbox-id": sandboxID, "x-access-token": envdAccessToken };
  try {
    assert.equal((await call("/files?path=x", { headers: { "e2b-sandbox-id": "nope" } })).status, 502);
    assert.equal((await call("/files?path=a%00b", { headers: envd })).status, 400);
    assert.equal((await call("/files?path=/etc/shadow", { headers: envd })).status, 400);
    assert.equal((await call("/files?path=../../etc/shadow", { headers: envd })).status, 400);
    const big = await fetch(`${stack.compat.url}/files?path=big`, {
      method: "POST",
      headers: { ...envd, "content-type": "application/octet-stream", "content-length": String(200 * 1024 * 1024) },
      body: "x",
    }).catch((e: Error) => ({ status: -1, text: async () => e.message }));
    assert.ok(big.status === 413 || big.status === -1, `oversized upload: ${big.status}`);
    const rpc = await fetch(`${stack.compat.url}/filesystem.Filesystem/Stat`, {
      method: "POST",
      headers: { ...envd, "content-type": "application/json" },
      body: "{not json",
    });
    assert.ok(rpc.status >= 400 && rpc.status < 500, `garbage Connect JSON: ${rpc.status} ${await rpc.text()}`);
    const start = await fetch(`${stack.compat.url}/process.Process/List`, {
      method: "POST",
      headers: { ...envd, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(start.status, 200, await start.text());
  } finally {
    await call(`/sandboxes/${sandboxID}`, { method: "DELETE" });
  }
});
