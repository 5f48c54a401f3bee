import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { TickResponseSchema } from "@platform/gen/rpctest/v1/rpctest_pb";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { testServer } from "../testing/fixture.ts";
import { escapeText } from "./sse.ts";

interface Read {
  status: number;
  headers: Headers;
  events: EventSourceMessage[];
  comments: string[];
  body: string;
}

/** Reads an SSE response until it ends, or until `stop` says so (then aborts). */
async function readSse(
  url: string,
  init: RequestInit = {},
  stop?: (r: Read) => boolean,
): Promise<Read & { abort: AbortController }> {
  const abort = new AbortController();
  const res = await fetch(url, { ...init, signal: abort.signal });
  const out: Read = { status: res.status, headers: res.headers, events: [], comments: [], body: "" };
  const parser = createParser({
    onEvent: (e) => out.events.push(e),
    onComment: (c) => out.comments.push(c),
  });
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  for (;;) {
    if (stop?.(out)) {
      abort.abort();
      break;
    }
    const { done, value } = await reader.read();
    if (done) break;
    const text = dec.decode(value, { stream: true });
    out.body += text;
    parser.feed(text);
  }
  return { ...out, abort };
}

describe("SSE bridge", () => {
  const { server, probe } = testServer({ ssePingMs: 40 });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("SSE_DATA_JSON: headers, id lines from id_field (left out of data), numbers, zero fields omitted", async () => {
    const r = await readSse(`${url}/v1/ticks?count=3`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "text/event-stream");
    assert.equal(r.headers.get("cache-control"), "no-cache");
    assert.equal(r.headers.get("x-accel-buffering"), "no");
    assert.deepEqual(
      r.events.map((e) => [e.id, e.event, JSON.parse(e.data)]),
      [
        ["1", undefined, { text: "tick 1", tokens: 1000 }],
        ["2", undefined, { text: "tick 2", tokens: 2000 }],
        ["3", undefined, { text: "tick 3", tokens: 3000, last: true }],
      ],
    );
    // Each event is `data: <json>` followed by a blank line.
    assert.match(r.body, /^id: 1\ndata: \{"text":"tick 1","tokens":1000\}\n\n/);
  });

  test("Last-Event-ID fills the resume field", async () => {
    const r = await readSse(`${url}/v1/ticks?count=2`, { headers: { "last-event-id": "41" } });
    assert.deepEqual(
      r.events.map((e) => e.id),
      ["42", "43"],
    );
  });

  test("a bad Last-Event-ID is a 400 envelope", async () => {
    const r = await fetch(`${url}/v1/ticks?count=2`, { headers: { "last-event-id": "x" } });
    assert.equal(r.status, 400);
    assert.equal(((await r.json()) as { error: { code: string } }).error.code, "invalid_argument");
  });

  test("oneof framing: escaped text in unnamed events, named JSON events, terminal event ends the stream", async () => {
    const r = await readSse(`${url}/v1/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ chunks: ["line1\nline2", "a\r\nb", "plain"] }),
    });
    assert.deepEqual(
      r.events.map((e) => [e.event, e.data]),
      [
        [undefined, "line1\\nline2"],
        [undefined, "a\\r\\nb"],
        [undefined, "plain"],
        ["usage", '{"tokensIn":3}'],
        ["done", "{}"],
      ],
    );
    assert.ok(!r.body.includes("after terminal"));
  });

  test("mid-stream error → the contract's error event; internal errors say nothing more", async () => {
    const r = await readSse(`${url}/v1/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ chunks: ["x"], fail: "provider went away" }),
    });
    assert.equal(r.status, 200);
    assert.deepEqual(
      r.events.map((e) => [e.event, e.data]),
      [
        [undefined, "x"],
        ["error", '{"message":"provider went away"}'],
      ],
    );
    const crash = await readSse(`${url}/v1/chat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ chunks: [], fail: "crash" }),
    });
    // An error before the first message is an HTTP error, not a stream.
    assert.equal(crash.status, 500);
    assert.ok(!crash.body.includes("secret"));
  });

  test("an error before the first message answers with the HTTP envelope and status", async () => {
    const r = await fetch(`${url}/v1/ticks?fail_first=true`);
    assert.equal(r.status, 404);
    assert.equal(r.headers.get("content-type"), "application/json");
    assert.equal(r.headers.get("retry-after"), "7");
    assert.deepEqual(await r.json(), { error: { code: "not_found", message: "no such stream" } });
  });

  test("openStream sends the 200 and SSE headers before the first event; a failure after it ends the stream", async () => {
    const abort = new AbortController();
    const timeout = new Promise<string>((resolve) => setTimeout(resolve, 20_000, "no headers"));
    const res = await Promise.race([
      fetch(`${url}/v1/ticks?open_first=true&wait_first=true&count=1`, { signal: abort.signal }),
      timeout,
    ]);
    assert.notEqual(res, "no headers", "the headers waited for an event");
    const opened = res as Response;
    assert.equal(opened.status, 200);
    assert.equal(opened.headers.get("content-type"), "text/event-stream");
    abort.abort();
    await opened.body?.cancel().catch(() => {});
    // The same failure as "an error before the first message", but after the
    // handler opened the stream: the status is already out.
    const failed = await readSse(`${url}/v1/ticks?open_first=true&fail_first=true`);
    assert.equal(failed.status, 200);
    assert.deepEqual(failed.events, []);
  });

  test("without an error variant a mid-stream failure just ends the stream", async () => {
    const r = await readSse(`${url}/v1/ticks?count=5&fail_after=2`);
    assert.deepEqual(
      r.events.map((e) => e.id),
      ["1", "2"],
    );
  });

  test("events are flushed one by one and comment pings keep the stream alive", async () => {
    const r = await readSse(
      `${url}/v1/ticks?count=1&hang=true&interval_ms=20`,
      {},
      (x) => x.events.length >= 3 && x.comments.length >= 1,
    );
    assert.ok(r.events.length >= 3);
    assert.ok(r.comments.includes("ping"), JSON.stringify(r.comments));
  });

  test("client disconnect fires the handler's AbortSignal", async () => {
    const aborted = probe.nextAbort();
    await readSse(`${url}/v1/ticks?hang=true&interval_ms=10`, {}, (x) => x.events.length >= 1);
    const timer = new Promise((r) => setTimeout(() => r("handler not cancelled"), 5000).unref());
    assert.equal(await Promise.race([aborted, timer]), "tick");
  });
});

describe("SSE error event from a server option", () => {
  const { server } = testServer({
    sseErrorEvent: (err) => create(TickResponseSchema, { text: `error: ${err.message}`, last: true }),
  });
  let url = "";
  before(async () => {
    url = (await server.listen()).url;
  });
  after(() => server.close());

  test("the option supplies the error event for a data-framed stream", async () => {
    const r = await readSse(`${url}/v1/ticks?count=5&fail_after=1`);
    assert.deepEqual(
      r.events.map((e) => JSON.parse(e.data)),
      [
        { text: "tick 1", tokens: 1000 },
        { text: "error: provider went away", last: true },
      ],
    );
  });
});

test("escapeText keeps one chunk on one data line", () => {
  assert.equal(escapeText("a\nb\rc\r\nd"), "a\\nb\\rc\\r\\nd");
  assert.equal(escapeText("no breaks"), "no breaks");
});

test("data_fields keeps only the listed fields in a JSON data object", async () => {
  const { SseFramer } = await import("./sse.ts");
  const { SseStreamSchema, SseData } = await import("@platform/gen/platform/api/v1/options_pb");
  const framer = new SseFramer(
    TickResponseSchema,
    create(SseStreamSchema, { idField: "seq", data: SseData.JSON, dataFields: ["text", "tokens"] }),
  );
  const frame = framer.frame(create(TickResponseSchema, { seq: 7n, text: "hi", tokens: 3n, last: true }));
  assert.equal(frame?.text, 'id: 7\ndata: {"text":"hi","tokens":3}\n\n');
  assert.throws(
    () => new SseFramer(TickResponseSchema, create(SseStreamSchema, { data: SseData.JSON, dataFields: ["nope"] })),
    /data_fields "nope"/,
  );
});
