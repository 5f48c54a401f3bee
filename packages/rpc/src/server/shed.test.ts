import assert from "node:assert/strict";
import http from "node:http";
import { after, before, describe, test } from "node:test";
import { Code, PlatformError } from "@platform/errors";
import { testServer } from "../testing/fixture.ts";

// ServerOptions.shed: a refusal before routing answers exactly what the
// handler raising the same error would, runs no handler, never touches the
// health endpoints or procedure paths, and leaves a kept-alive connection usable.
describe("shed: refusing a request before it is routed", () => {
  const busy = new PlatformError(Code.Unavailable, "busy", "too busy; retry shortly", { retry_after: "3" });
  let shedding = true;
  const seen: string[] = [];
  const { server } = testServer({
    restOnly: true,
    shed: (req, path) => {
      seen.push(`${req.method} ${path}`);
      return shedding && path !== "/v1/fail" ? busy : undefined;
    },
  });
  let base = "";
  before(async () => {
    base = (await server.listen()).url;
  });
  after(() => server.close());

  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });

  test("the same status, body and Retry-After as the handler's own refusal, and no handler runs", async () => {
    const early = await post("/v1/echo", { text: "x" });
    // The same error raised by a handler (the fixture's Fail throws what it is told).
    const late = await post("/v1/fail", {
      code: "unavailable",
      reason: "busy",
      message: "too busy; retry shortly",
      extra: { retry_after: "3" },
    });
    assert.equal(early.status, 503);
    assert.equal(early.status, late.status);
    assert.equal(early.headers.get("retry-after"), "3");
    assert.equal(early.headers.get("retry-after"), late.headers.get("retry-after"));
    assert.deepEqual(await early.json(), await late.json());
    assert.ok(early.headers.get("x-request-id"), "a refusal still carries its request id");
  });

  test("health endpoints are never offered to it; without a refusal the request is served", async () => {
    seen.length = 0;
    assert.equal((await fetch(`${base}/livez`)).status, 200);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    assert.deepEqual(seen, []);
    shedding = false;
    try {
      const r = await post("/v1/echo", { text: "hi" });
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as { text: string }).text, "hi");
    } finally {
      shedding = true;
    }
  });

  test("a kept-alive connection carries the next request after a refusal whose body was never read", async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    after(() => agent.destroy());
    const once = (text: string) =>
      new Promise<{ status: number; body: string; reused: boolean }>((resolve, reject) => {
        const body = JSON.stringify({ text: text.repeat(50_000) });
        const req = http.request(
          `${base}/v1/echo`,
          { method: "POST", agent, headers: { "content-type": "application/json", "content-length": body.length } },
          (res) => {
            let got = "";
            res.on("data", (c: Buffer) => (got += c.toString()));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body: got, reused: req.reusedSocket }));
          },
        );
        req.on("error", reject);
        req.end(body);
      });
    assert.equal((await once("a")).status, 503);
    shedding = false;
    try {
      const next = await once("b");
      assert.equal(next.status, 200);
      assert.equal(next.reused, true);
    } finally {
      shedding = true;
    }
  });
});
