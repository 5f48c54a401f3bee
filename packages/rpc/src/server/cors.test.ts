import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { testServer } from "../testing/fixture.ts";
import { CORS_ALLOW_HEADERS, CORS_EXPOSE_HEADERS, CorsSettingError, parseAllowedOrigins } from "./cors.ts";

test("CORS_ALLOWED_ORIGINS: origins only, normalized, no wildcard", () => {
  assert.deepEqual(parseAllowedOrigins(undefined), []);
  assert.deepEqual(parseAllowedOrigins(" "), []);
  assert.deepEqual(parseAllowedOrigins("http://127.0.0.1:5173, https://App.Example.com/ ,http://127.0.0.1:5173"), [
    "http://127.0.0.1:5173",
    "https://app.example.com",
  ]);
  for (const bad of [
    "*",
    "null",
    "example.com",
    "ftp://example.com",
    "https://example.com/app",
    "https://example.com?x=1",
    "https://u:p@example.com",
  ]) {
    assert.throws(() => parseAllowedOrigins(bad), CorsSettingError, bad);
  }
});

describe("CORS on a public port", () => {
  const allowed = "http://127.0.0.1:4321";
  const { server } = testServer({ restOnly: true, cors: { allowedOrigins: [allowed] } });
  const { server: closed } = testServer({ restOnly: true });
  const { server: internal } = testServer();
  const urls: Record<string, string> = {};
  before(async () => {
    urls.open = (await server.listen()).url;
    urls.closed = (await closed.listen()).url;
    urls.internal = (await internal.listen()).url;
  });
  after(async () => {
    await Promise.all([server.close(), closed.close(), internal.close()]);
  });

  const preflight = (base: string, origin: string) =>
    fetch(`${base}/v1/echo`, {
      method: "OPTIONS",
      headers: {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    });

  test("a preflight from an allowed origin: 204 with the methods, request headers and max age", async () => {
    const r = await preflight(urls.open!, allowed);
    assert.equal(r.status, 204);
    assert.equal(r.headers.get("access-control-allow-origin"), allowed);
    assert.equal(r.headers.get("access-control-allow-methods"), "GET, POST, PATCH, DELETE");
    assert.deepEqual(r.headers.get("access-control-allow-headers")?.split(", "), CORS_ALLOW_HEADERS);
    assert.equal(r.headers.get("access-control-max-age"), "600");
    assert.equal(r.headers.get("access-control-allow-credentials"), null);
    assert.match(r.headers.get("vary") ?? "", /Origin/);
  });

  test("answers to an allowed origin carry Allow-Origin and the exposed headers, errors included", async () => {
    const ok = await fetch(`${urls.open}/v1/echo`, {
      method: "POST",
      headers: { origin: allowed, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.get("access-control-allow-origin"), allowed);
    assert.deepEqual(ok.headers.get("access-control-expose-headers")?.split(", "), CORS_EXPOSE_HEADERS);
    const bad = await fetch(`${urls.open}/v1/echo`, {
      method: "POST",
      headers: { origin: allowed, "content-type": "text/plain" },
      body: "{}",
    });
    assert.equal(bad.status, 415);
    assert.equal(bad.headers.get("access-control-allow-origin"), allowed);
  });

  test("another origin, or none allowed (the default): the preflight is 403 origin_not_allowed and nothing says CORS", async () => {
    for (const [base, origin] of [
      [urls.open!, "http://127.0.0.1:4322"],
      [urls.open!, "null"],
      [urls.closed!, allowed],
    ] as const) {
      const r = await preflight(base, origin);
      assert.equal(r.status, 403, `${base} ${origin}`);
      assert.deepEqual(await r.json(), {
        error: { code: "origin_not_allowed", message: `origin ${origin} is not allowed` },
      });
      assert.equal(r.headers.get("access-control-allow-origin"), null);
      const get = await fetch(`${base}/v1/echo`, {
        method: "POST",
        headers: { origin, "content-type": "application/json" },
        body: "{}",
      });
      assert.equal(get.status, 200);
      assert.equal(get.headers.get("access-control-allow-origin"), null);
    }
  });

  test("OPTIONS without a preflight's headers, and any OPTIONS on an internal port, are served as before (405)", async () => {
    assert.equal((await fetch(`${urls.open}/v1/echo`, { method: "OPTIONS" })).status, 405);
    const r = await preflight(urls.internal!, allowed);
    assert.equal(r.status, 405);
    assert.equal(r.headers.get("access-control-allow-origin"), null);
  });
});
