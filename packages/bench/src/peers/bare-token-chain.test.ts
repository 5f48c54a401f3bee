import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { createTestDatabase } from "@platform/db/testing";
import { ensurePki, tlsEnv } from "@platform/pki";
import { loadServiceTls } from "@platform/rpc";
import { stampsOf } from "../host/bench-model.ts";
import { readSse } from "../sse-client.ts";
import { startTokenEdge, startTokenRelay, startTokenSource } from "./bare-token-chain.ts";

// The per-token figure's hops floor carries every token, stamped at its source and committed
// there, through both mutual-TLS hops to one SSE event each at the edge.
test("the token hops floor relays paced, committed, stamped tokens source → relay → edge", {
  timeout: 60_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), "token-chain-"));
  const pki = await ensurePki(join(dir, "tls"));
  const tls = (name: string) => loadServiceTls(tlsEnv(pki.files(name)), name);
  const database = await createTestDatabase<unknown>();
  const source = await startTokenSource("127.0.0.1", tls("agents"), database.url);
  const relay = await startTokenRelay("127.0.0.1", tls("runtime-worker"), source.url);
  const edge = await startTokenEdge("127.0.0.1", tls("runtime-router"), relay.url);
  try {
    const before = process.hrtime.bigint();
    const r = await readSse("POST", `${edge.url}/invoke`, "-", {}, undefined, {
      "x-tokens": "5",
      "x-interval-us": "2000",
    });
    assert.equal(r.status, 200);
    const stamps = r.events.flatMap((e) => stampsOf(e.data));
    assert.equal(stamps.length, 5, "one event a token");
    for (const [i, s] of stamps.entries()) {
      assert.ok(s > before && s < r.events[i]!.at, "stamped at the source, before its arrival");
      // 2 ms asked; Node schedules a timer from the loop's cached clock, so one may fire a little early under load.
      if (i > 0) assert.ok(s - stamps[i - 1]! >= 1_000_000n, "paced, not sent at once");
    }
    if (database.url) {
      const rows = await database.run!<{ n: number }>("select count(*)::int as n from bench_token_floor", []);
      assert.equal(rows[0]!.n, 5, "each token committed at the source");
    }
  } finally {
    await edge.close();
    await relay.close();
    await source.close();
    await database.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
