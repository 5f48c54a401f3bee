import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { LATENCY_BUCKETS, ServerMetrics } from "./server-metrics.ts";

/** Counts the calls of `name` on `target` (prom-client's own inc/observe/dec), still calling through. */
function spy(target: object, name: string): { calls: number } {
  const counted = { calls: 0 };
  const t = target as Record<string, (...a: unknown[]) => unknown>;
  const original = t[name]!.bind(target);
  t[name] = (...a: unknown[]) => {
    counted.calls++;
    return original(...a);
  };
  return counted;
}

const SECONDS = [0.0004, 0.001, 0.003, 0.005, 0.2, 7, 61, 0.0004];

/** The same observations through prom-client's plain API, in a registry of its own. */
function plainRegistry(): Registry {
  const registry = new Registry();
  const registers = [registry];
  const rpcLabels = ["server", "service", "method", "code"];
  const httpLabels = ["server", "method", "route", "code"];
  const handled = new Counter({
    name: "platform_rpc_server_handled_total",
    help: "x",
    labelNames: rpcLabels,
    registers,
  });
  const duration = new Histogram({
    name: "platform_rpc_server_handling_seconds",
    help: "x",
    labelNames: rpcLabels,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const requests = new Counter({ name: "platform_http_requests_total", help: "x", labelNames: httpLabels, registers });
  const httpDuration = new Histogram({
    name: "platform_http_request_duration_seconds",
    help: "x",
    labelNames: httpLabels,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const open = new Gauge({
    name: "platform_rpc_server_streams_open",
    help: "x",
    labelNames: ["server", "service", "method"],
    registers,
  });
  for (const s of SECONDS) {
    const code = s > 1 ? "UNAVAILABLE" : "OK";
    handled.inc({ server: "a", service: "svc", method: "M", code });
    duration.observe({ server: "a", service: "svc", method: "M", code }, s);
    requests.inc({ server: "a", method: "POST", route: "/svc/M", code: "200" });
    httpDuration.observe({ server: "a", method: "POST", route: "/svc/M", code: "200" }, s);
    requests.inc({ server: "a", method: "other", route: "/x", code: "404" });
    httpDuration.observe({ server: "a", method: "other", route: "/x", code: "404" }, s);
  }
  open.inc({ server: "a", service: "svc", method: "S" }, 3);
  open.dec({ server: "a", service: "svc", method: "S" });
  return registry;
}

function observeAll(m: ServerMetrics): void {
  for (const s of SECONDS) {
    m.observeRpc("a", "svc", "M", s > 1 ? "UNAVAILABLE" : "OK", s);
    m.observeHttp("a", "POST", "/svc/M", "200", s);
    m.observeHttp("a", "BREW", "/x", "404", s);
  }
  const open = m.streamsOpen("a", "svc", "S");
  open.inc();
  open.inc();
  m.streamsOpen("a", "svc", "S").inc();
  m.streamsOpen("a", "svc", "S").dec();
}

/** The exposition lines of the families both registries have (help text aside). */
async function samples(r: Registry): Promise<string[]> {
  const names = [
    "platform_rpc_server_handled_total",
    "platform_rpc_server_handling_seconds",
    "platform_http_requests_total",
    "platform_http_request_duration_seconds",
    "platform_rpc_server_streams_open",
  ];
  const text = await r.metrics();
  return text
    .split("\n")
    .filter((l) => !l.startsWith("#") && names.some((n) => l.startsWith(n)))
    .sort();
}

describe("ServerMetrics' series (found once per label set)", () => {
  test("export the same values as prom-client's own inc, observe and dec", async () => {
    const m = new ServerMetrics();
    observeAll(m);
    const ours = await samples(m.registry);
    assert.ok(ours.length > 40);
    assert.deepEqual(ours, await samples(plainRegistry()));
  });

  test("a label set seen before is added to without prom-client's inc/observe (no label hashing per call)", () => {
    const m = new ServerMetrics();
    const handled = spy(m.rpcHandled, "inc");
    const duration = spy(m.rpcDuration, "observe");
    const requests = spy(m.httpRequests, "inc");
    const httpDuration = spy(m.httpDuration, "observe");
    const opened = spy(m.rpcStreamsOpen, "inc");
    const closed = spy(m.rpcStreamsOpen, "dec");
    for (let i = 0; i < 100; i++) {
      m.observeRpc("a", "svc", "M", "OK", 0.002);
      m.observeHttp("a", "POST", "/svc/M", "200", 0.002);
      const open = m.streamsOpen("a", "svc", "S");
      open.inc();
      open.dec();
    }
    // The first call of each series made it; the other 99 added to it directly.
    assert.deepEqual(
      [handled, duration, requests, httpDuration, opened].map((c) => c.calls),
      [1, 1, 1, 1, 1],
    );
    assert.equal(closed.calls, 0);
  });

  test("a reset registry starts its series again from zero", async () => {
    const m = new ServerMetrics();
    observeAll(m);
    m.registry.resetMetrics();
    observeAll(m);
    assert.deepEqual(await samples(m.registry), await samples(plainRegistry()));
  });
});
