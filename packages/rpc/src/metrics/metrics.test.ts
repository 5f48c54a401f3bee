import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigError } from "@platform/config";
import { LibraryService, StreamService } from "@platform/gen/rpctest/v1/rpctest_pb";
import type { NodeRequest } from "../http/node-io.ts";
import { collectRoutes } from "../transcode/routes.ts";
import { routeLabeler } from "./route-label.ts";
import { testServer } from "../testing/fixture.ts";
import {
  ExpositionError,
  type Family,
  labelValues,
  parsePrometheusText,
  sampleSum,
  scrapeMetrics,
} from "../testing/prometheus-text.ts";
import { ServerMetrics } from "./server-metrics.ts";
import { metricsTokenSetting } from "./setting.ts";

const TOKEN = "test-metrics-token-0123456789abcdef";

describe("/metrics on a server", () => {
  const metrics = new ServerMetrics();
  const { server } = testServer({ metricsToken: TOKEN, metrics });
  // A second listener of the same process records into the same registry.
  const { server: publicPort } = testServer({ name: "rpctest-public", restOnly: true, metricsToken: TOKEN, metrics });
  const { server: off } = testServer();
  let url = "";
  let publicUrl = "";
  let offUrl = "";
  before(async () => {
    url = (await server.listen()).url;
    publicUrl = (await publicPort.listen()).url;
    offUrl = (await off.listen()).url;
  });
  after(async () => {
    await Promise.all([server.close(), publicPort.close(), off.close()]);
  });
  const scrape = (base = url) => scrapeMetrics(`${base}/metrics`, TOKEN);
  const http = (labels: Record<string, string>, fams: Map<string, Family>) =>
    sampleSum(fams, "platform_http_requests_total", labels);

  test("requests move the counters, labelled by route template and status, never by raw path", async () => {
    const before = await scrape();
    const ids = ["7", "8"];
    for (const id of ids) assert.equal((await fetch(`${url}/v1/shelves/${id}`)).status, 200);
    assert.equal((await fetch(`${url}/v1/shelves/404`)).status, 404);
    assert.equal((await fetch(`${url}/no/such/path/123`)).status, 404);
    assert.equal((await fetch(`${publicUrl}/v1/shelves/9`)).status, 200);
    const grpc = createClient(LibraryService, createGrpcTransport({ baseUrl: url }));
    assert.equal((await grpc.getShelf({ shelf: 5n })).name, "shelf 5");
    const sse = await fetch(`${url}/v1/ticks?count=3`);
    assert.equal(sse.headers.get("content-type"), "text/event-stream");
    assert.match(await sse.text(), /tick 3/);
    // A stream the server ends at its terminal event (the handler would yield more) is OK, not CANCELLED.
    const chat = await fetch(`${url}/v1/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ chunks: ["a", "b"] }),
    });
    assert.doesNotMatch(await chat.text(), /after terminal/);

    const fams = await scrape();
    const delta = (labels: Record<string, string>) => http(labels, fams) - http(labels, before);
    const shelf = { server: "rpctest", method: "GET", route: "/v1/shelves/{shelf}" };
    assert.equal(delta({ ...shelf, code: "200" }), 2);
    assert.equal(delta({ ...shelf, code: "404" }), 1);
    assert.equal(delta({ ...shelf, server: "rpctest-public", code: "200" }), 1);
    assert.equal(delta({ server: "rpctest", route: "unmatched", code: "404" }), 1);
    assert.equal(delta({ server: "rpctest", route: "/rpctest.v1.LibraryService/GetShelf", code: "200" }), 1);
    assert.equal(delta({ server: "rpctest", route: "/v1/ticks", code: "200" }), 1);

    // Every RPC by its status, whichever protocol carried it.
    const rpc = (labels: Record<string, string>) =>
      sampleSum(fams, "platform_rpc_server_handled_total", labels) -
      sampleSum(before, "platform_rpc_server_handled_total", labels);
    const getShelf = { service: "rpctest.v1.LibraryService", method: "GetShelf" };
    assert.equal(rpc({ ...getShelf, server: "rpctest", code: "OK" }), 3);
    assert.equal(rpc({ ...getShelf, server: "rpctest", code: "NOT_FOUND" }), 1);
    assert.equal(rpc({ service: "rpctest.v1.StreamService", method: "Tick", code: "OK" }), 1);
    assert.equal(rpc({ service: "rpctest.v1.StreamService", method: "Chat", code: "OK" }), 1);
    assert.equal(rpc({ service: "rpctest.v1.StreamService", method: "Chat", code: "CANCELLED" }), 0);

    // The histograms count what the counters count.
    for (const [counter, histogram] of [
      ["platform_http_requests_total", "platform_http_request_duration_seconds_count"],
      ["platform_rpc_server_handled_total", "platform_rpc_server_handling_seconds_count"],
    ] as const) {
      assert.equal(sampleSum(fams, histogram), sampleSum(fams, counter), histogram);
    }
    assert.equal(fams.get("platform_http_request_duration_seconds")?.type, "histogram");
    assert.equal(fams.get("platform_http_requests_total")?.type, "counter");

    // Labels are templates and known procedure paths: no id of a path is a label value.
    const routes = labelValues(fams, "platform_http_requests_total", "route");
    for (const r of routes) {
      assert.ok(r === "unmatched" || r.startsWith("/v1/") || r.startsWith("/rpctest.v1.") || r === "/metrics", r);
      assert.doesNotMatch(r, /\/(7|8|9|404|123)(\/|$)/, r);
    }
    assert.ok(!routes.has("/no/such/path/123"));

    // The default process metrics are in the server's registry.
    assert.ok(sampleSum(fams, "process_cpu_user_seconds_total") > 0);
    assert.ok(fams.has("nodejs_eventloop_lag_seconds"));
    assert.ok(fams.has("nodejs_heap_size_used_bytes"));
  });

  test("an open SSE stream shows as open and in flight until it ends", async () => {
    const abort = new AbortController();
    const r = await fetch(`${url}/v1/ticks?hang=true&interval_ms=20`, { signal: abort.signal });
    assert.equal(r.status, 200);
    const open = await scrape();
    assert.equal(sampleSum(open, "platform_sse_streams_open", { server: "rpctest", route: "/v1/ticks" }), 1);
    assert.equal(sampleSum(open, "platform_rpc_server_streams_open", { method: "Tick" }), 1);
    // The scrape itself and the stream.
    assert.ok(sampleSum(open, "platform_http_requests_in_flight", { server: "rpctest" }) >= 2);
    abort.abort();
    await r.body?.cancel().catch(() => {});
    // The server sees the disconnect asynchronously: wait for it, within a bound.
    let closed: Map<string, Family> = open;
    for (let i = 0; i < 100; i++) {
      closed = await scrape();
      if (sampleSum(closed, "platform_sse_streams_open", { route: "/v1/ticks" }) === 0) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.equal(sampleSum(closed, "platform_sse_streams_open", { route: "/v1/ticks" }), 0);
    assert.equal(sampleSum(closed, "platform_rpc_server_streams_open", { method: "Tick" }), 0);
    assert.ok(sampleSum(closed, "platform_rpc_server_handled_total", { method: "Tick", code: "CANCELLED" }) >= 1);
  });

  test("/metrics needs the bearer token; without METRICS_TOKEN it is not served", async () => {
    for (const auth of [undefined, "Bearer wrong-token", `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
      const r = await fetch(`${url}/metrics`, { headers: auth ? { authorization: auth } : {} });
      assert.equal(r.status, 401, String(auth));
      assert.match(r.headers.get("www-authenticate") ?? "", /^Bearer/);
      assert.doesNotMatch(await r.text(), /platform_|process_/);
    }
    const unserved = await fetch(`${offUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(unserved.status, 404);
    assert.doesNotMatch(await unserved.text(), /platform_|process_/);
    // The public (REST-only) listener serves it as well, from the shared registry.
    const fams = await scrape(publicUrl);
    assert.ok(labelValues(fams, "platform_http_requests_total", "server").has("rpctest"));
  });

  test("servers with registries of their own do not share series", async () => {
    const { server: a } = testServer({ metricsToken: TOKEN });
    const { server: b } = testServer({ metricsToken: TOKEN });
    try {
      const [ua, ub] = [(await a.listen()).url, (await b.listen()).url];
      assert.equal((await fetch(`${ua}/v1/shelves/1`)).status, 200);
      const shelf = { route: "/v1/shelves/{shelf}" };
      assert.equal(sampleSum(await scrapeMetrics(`${ua}/metrics`, TOKEN), "platform_http_requests_total", shelf), 1);
      assert.equal(sampleSum(await scrapeMetrics(`${ub}/metrics`, TOKEN), "platform_http_requests_total", shelf), 0);
      assert.notEqual(a.metrics.registry, b.metrics.registry);
      // Both serve /metrics, so both have their own process metrics; a server without a token has none.
      assert.ok(sampleSum(await scrapeMetrics(`${ub}/metrics`, TOKEN), "process_cpu_user_seconds_total") > 0);
      assert.equal((await off.metrics.registry.metrics()).includes("process_cpu"), false);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

test("route labels: templates for requests never routed (shed, refused), within a bounded cache", () => {
  const routes = collectRoutes([LibraryService, StreamService]);
  const labels = routeLabeler(routes, new Set(["/rpctest.v1.LibraryService/GetShelf"]), ["/openapi.json"]);
  const req = (method: string, url: string) => ({ method, url }) as NodeRequest;
  for (let i = 0; i < 3000; i++) assert.equal(labels.of(req("GET", `/v1/shelves/${i}?x=1`)), "/v1/shelves/{shelf}");
  assert.equal(labels.of(req("DELETE", "/v1/shelves/1")), "unmatched");
  assert.equal(labels.of(req("GET", "/v1/files/a/b/c")), "/v1/files/{path=**}");
  assert.equal(labels.of(req("POST", "/rpctest.v1.LibraryService/GetShelf")), "/rpctest.v1.LibraryService/GetShelf");
  assert.equal(labels.of(req("POST", "/rpctest.v1.LibraryService/Nope")), "unmatched");
  assert.equal(labels.of(req("GET", "/openapi.json")), "/openapi.json");
  const routed = req("GET", "/v1/shelves/9");
  labels.routed(routed, routes.find((r) => r.template.source === "/v1/echo/{text}")!);
  assert.equal(labels.of(routed), "/v1/echo/{text}", "what the REST handler matched wins");
});

test("METRICS_TOKEN: unset is off; short or unprintable tokens are refused", () => {
  const field = metricsTokenSetting();
  assert.equal(field.read({}), undefined);
  assert.equal(field.read({ METRICS_TOKEN: TOKEN }), TOKEN);
  for (const bad of ["short", `${TOKEN} x`, `${TOKEN}\u00e9`]) {
    assert.throws(() => field.read({ METRICS_TOKEN: bad }), ConfigError);
  }
});

test("the exposition parser is strict", () => {
  const ok = [
    "# HELP a_total Things.",
    "# TYPE a_total counter",
    'a_total{x="1",y="q\\"\\n\\\\"} 3',
    "# TYPE h histogram",
    'h_bucket{le="0.1"} 1',
    'h_bucket{le="+Inf"} 2',
    "h_sum 0.3",
    "h_count 2",
    "",
  ].join("\n");
  const fams = parsePrometheusText(ok);
  assert.equal(fams.get("a_total")?.samples[0]?.labels.y, 'q"\n\\');
  assert.equal(sampleSum(fams, "h_count"), 2);
  for (const bad of [
    "a 1", // no newline at the end
    "1a 1\n",
    'a{1x="1"} 1\n',
    "a{x=1} 1\n",
    'a{x="1",x="2"} 1\n',
    'a{x="\\t"} 1\n',
    "a one\n",
    "a 1\na 2\n",
    "a 1\nb 1\na 2\n",
    "a 1\n# TYPE a counter\n",
    "# TYPE a counter\n# TYPE a gauge\n",
    "# TYPE a nonsense\n",
    "# TYPE c counter\nc -1\n",
    '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
    '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n',
    '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 1\n',
  ]) {
    assert.throws(() => parsePrometheusText(bad), ExpositionError, JSON.stringify(bad));
  }
});
