import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import pino from "pino";
import { DevModel } from "../../providers/dev.ts";
import { ProviderRegistry } from "../../providers/registry.ts";
import {
  parseSse,
  type RestCallOptions,
  restCall,
  type ServerHarness,
  type SseFrame,
  sendMessage,
  startServerHarness,
} from "../../testing/harness.ts";
import { type Script, ScriptedModel } from "../../testing/scripted-model.ts";

// MCP tools (issue 20 item 5) through the real agents HTTP server: real MCP
// servers built with the SDK's server side on 127.0.0.1, the scripted model
// calling `<server>__<tool>`.

const SECRET = `sk-mcp-${randomBytes(12).toString("hex")}`;
const TOOL_TIMEOUT_MS = 1500;

/** What one MCP server saw. */
type Seen = { headers: IncomingHttpHeaders[]; calls: { name: string; args: unknown }[] };

/**
 * An MCP server over Streamable HTTP (stateless: a server and transport per
 * request, as the SDK's examples do). `vanish` closes the whole HTTP server
 * while its call is in flight.
 */
async function startMcpServer(): Promise<{ url: string; seen: Seen; http: Server; release: () => void }> {
  const seen: Seen = { headers: [], calls: [] };
  let release!: () => void;
  const never = new Promise<void>((resolve) => {
    release = resolve;
  });
  const http = createServer(async (req, res) => {
    seen.headers.push(req.headers);
    if (req.method !== "POST") {
      res.writeHead(405).end();
      return;
    }
    const server = new McpServer({ name: "test-tools", version: "1.0.0" }, { capabilities: { tools: {} } });
    server.server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [
        {
          name: "echo",
          description: "Echoes its text",
          inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        },
        {
          name: "add",
          description: "Adds two numbers",
          inputSchema: {
            type: "object",
            properties: { a: { type: "number" }, b: { type: "number" } },
            required: ["a", "b"],
          },
        },
        { name: "slow", description: "Never answers", inputSchema: { type: "object", properties: {} } },
        { name: "fail", description: "Always fails", inputSchema: { type: "object", properties: {} } },
        { name: "vanish", description: "Takes the server down", inputSchema: { type: "object", properties: {} } },
        { name: "dotted.name/v2", description: "A name providers refuse", inputSchema: { type: "object" } },
        {
          name: "huge",
          description: "A schema over 32 KiB",
          inputSchema: {
            type: "object",
            properties: Object.fromEntries(
              Array.from({ length: 1000 }, (_, i) => [`p${i}`, { type: "string", description: "padding ".repeat(5) }]),
            ),
          },
        },
      ],
    }));
    server.server.setRequestHandler(CallToolRequestSchema, async (request) => {
      const { name, arguments: args } = request.params;
      seen.calls.push({ name, args });
      switch (name) {
        case "echo":
          return { content: [{ type: "text", text: `echo: ${String((args as { text?: string }).text)}` }] };
        case "add": {
          const { a, b } = args as { a: number; b: number };
          return { content: [{ type: "text", text: String(a + b) }] };
        }
        case "slow":
          await never;
          return { content: [{ type: "text", text: "too late" }] };
        case "fail":
          return { isError: true, content: [{ type: "text", text: "it broke" }] };
        case "vanish":
          http.close();
          http.closeAllConnections();
          await never;
          return { content: [] };
        default:
          return { content: [{ type: "text", text: `ran ${name}` }] };
      }
    });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const { port } = http.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/mcp`, seen, http, release };
}

const scripted = new ScriptedModel();
const providers = new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
let h: ServerHarness;
let logs = "";
let tools: Awaited<ReturnType<typeof startMcpServer>>;
let flaky: Awaited<ReturnType<typeof startMcpServer>>;

before(async () => {
  tools = await startMcpServer();
  flaky = await startMcpServer();
  // Every log line of the service, at the most verbose level: the secret must be in none.
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs += chunk.toString();
      done();
    },
  });
  h = await startServerHarness({
    providers,
    config: { toolTimeoutMs: TOOL_TIMEOUT_MS, secretsKey: randomBytes(32), mcpAllowPrivateTargets: true },
    logger: pino({ level: "trace" }, sink),
  });
});
after(async () => {
  tools?.release();
  flaky?.release();
  await h?.close();
  tools?.http.closeAllConnections();
  tools?.http.close();
});

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;

const call = (method: string, path: string, opts: RestCallOptions) => restCall(h.base, method, path, opts);

type Frame = SseFrame;

const send = (token: string, sessionId: string, content: string) => sendMessage(h.base, token, sessionId, content);

const use = (id: string, name: string, input: Json = {}) => ({ type: "tool_use", call: { id, name, input } }) as const;

function results(frames: Frame[]): Record<string, { content: string; isError: boolean }> {
  return Object.fromEntries(
    frames
      .filter((f) => f.data.type === "tool_result")
      .map((f) => [f.data.toolUseId, { content: f.data.content, isError: f.data.isError === true }]),
  );
}

async function agentWithServers(toolPermissions: Record<string, string> = {}) {
  const caller = h.identity.caller();
  const agent = await call("POST", "/v1/agents", {
    token: caller.token,
    body: {
      name: "M",
      slug: `m-${Math.random()}`,
      model: "scripted/x",
      toolPermissions,
      mcpServers: [
        { name: "tools", url: tools.url, headers: { "X-Api-Key": SECRET } },
        { name: "flaky", url: flaky.url },
      ],
    },
  });
  assert.equal(agent.status, 201, agent.text);
  const session = await call("POST", "/v1/sessions", { token: caller.token, body: { agentId: agent.json.id } });
  assert.equal(session.status, 201, session.text);
  return { caller, agent: agent.json, session: session.json };
}

describe("MCP servers on agents", () => {
  test("stored with their header names only; the header values are never returned, logged or stored in the clear", async () => {
    const { caller, agent } = await agentWithServers();
    assert.deepEqual(agent.mcpServers, [
      { name: "tools", url: tools.url, headerNames: ["X-Api-Key"] },
      { name: "flaky", url: flaky.url, headerNames: [] },
    ]);
    const got = await call("GET", `/v1/agents/${agent.id}`, { token: caller.token });
    const list = await call("GET", "/v1/agents", { token: caller.token });
    assert.equal(got.status, 200);
    assert.deepEqual(got.json.mcpServers, agent.mcpServers);
    for (const text of [got.text, list.text, JSON.stringify(agent)]) assert.ok(!text.includes(SECRET));
    const rows = await h.database.db.selectFrom("agents").select("mcp_servers").where("id", "=", agent.id).execute();
    const stored = JSON.stringify(rows[0]?.mcp_servers);
    assert.ok(stored.includes("sealedHeaders") && !stored.includes(SECRET), "sealed at rest");

    // Update merges by name: a new server added, one removed (empty url), the sealed headers of the other kept.
    const patched = await call("PATCH", `/v1/agents/${agent.id}`, {
      token: caller.token,
      body: {
        mcpServers: [
          { name: "flaky", url: "" },
          { name: "more", url: "https://mcp.example.com/x" },
        ],
      },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(
      patched.json.mcpServers.map((s: Json) => [s.name, s.headerNames]),
      [
        ["tools", ["X-Api-Key"]],
        ["more", []],
      ],
    );
    const renamed = await call("PATCH", `/v1/agents/${agent.id}`, { token: caller.token, body: { name: "N" } });
    assert.equal(renamed.json.mcpServers.length, 2, "absent: unchanged");
  });

  test("validated, naming the entry", async () => {
    const caller = h.identity.caller();
    const refused = async (mcpServers: Json[], message: RegExp) => {
      const res = await call("POST", "/v1/agents", {
        token: caller.token,
        body: { name: "A", slug: `v-${Math.random()}`, model: "dev/echo", mcpServers },
      });
      assert.equal(res.status, 400, res.text);
      assert.equal(res.json.error.code, "invalid_argument");
      assert.match(res.json.error.message, message);
      assert.ok(!res.text.includes(SECRET));
    };
    await refused([{ name: "Bad Name", url: tools.url }], /mcpServers\[0\]\.name/);
    await refused([{ name: "a__b", url: tools.url }], /without "__"/);
    await refused([{ name: "ok", url: "ftp://example.com/" }], /mcpServers\[0\]\.url must be http or https/);
    await refused([{ name: "ok", url: "not a url" }], /not a URL/);
    await refused([{ name: "ok", url: `https://example.com/${"x".repeat(2048)}` }], /longer than 2048/);
    await refused([{ name: "ok", url: "https://user:pw@example.com/" }], /credentials/);
    await refused(
      [
        { name: "a", url: tools.url },
        { name: "a", url: tools.url },
      ],
      /"a" twice/,
    );
    await refused(
      Array.from({ length: 9 }, (_, i) => ({ name: `s${i}`, url: tools.url })),
      /more than 8/,
    );
    await refused([{ name: "ok", url: tools.url, headers: { "Bad Header": SECRET } }], /headers/);
    await refused([{ name: "ok", url: tools.url, headers: { "X-Key": `a\r\nb${SECRET}` } }], /CR, LF/);
    await refused([{ name: "ok", url: tools.url, headers: { "Mcp-Session-Id": "x" } }], /set by the transport/);
  });
});

describe("MCP tools in a run", () => {
  test("offered as <server>__<tool> with their schemas; results, isError and a timeout go back to the model; the header reaches the server", async () => {
    const { caller, session } = await agentWithServers();
    const before = tools.seen.headers.length;
    scripted.push(
      [
        use("t1", "tools__echo", { text: "hi" }),
        use("t2", "tools__fail"),
        use("t3", "tools__slow"),
        use("t4", "tools__nope"),
      ] as Script,
      [{ type: "text", text: "all done" }],
    );
    const frames = await send(caller.token, session.id, "use the tools");
    assert.equal(frames.at(-1)?.data.type, "done", JSON.stringify(frames));
    const request = scripted.requests.at(-2)!;
    const names = request.tools.map((t) => t.name);
    for (const name of ["bash", "tools__echo", "tools__add", "tools__slow", "flaky__echo", "tools__dotted_name_v2"])
      assert.ok(names.includes(name), `${name} offered: ${names.join(",")}`);
    assert.ok(
      names.every((n) => /^[a-zA-Z0-9_-]{1,64}$/.test(n)),
      "every name fits the providers' rule",
    );
    assert.ok(!names.includes("tools__huge"), "a schema over 32 KiB is left out");
    assert.deepEqual(request.tools.find((t) => t.name === "tools__add")?.inputSchema, {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    });
    const r = results(frames);
    assert.deepEqual(r.t1, { content: "echo: hi", isError: false });
    assert.deepEqual(r.t2, { content: "it broke", isError: true });
    assert.equal(r.t3?.isError, true);
    assert.match(r.t3!.content, /tools__slow timed out after 1.5 s/);
    assert.equal(r.t4?.isError, true);
    assert.match(r.t4!.content, /does not list it/);
    assert.deepEqual(tools.seen.calls.filter((c) => c.name === "echo").at(-1), { name: "echo", args: { text: "hi" } });
    const sent = tools.seen.headers.slice(before);
    assert.ok(sent.length > 0 && sent.every((h) => h["x-api-key"] === SECRET), "every request carries the header");
    assert.ok(
      flaky.seen.headers.every((h) => h["x-api-key"] === undefined),
      "only to its own server",
    );
    // The model sees the results in its next call.
    assert.ok(JSON.stringify(scripted.requests.at(-1)?.messages).includes("echo: hi"));
    const log = await call("GET", `/v1/sessions/${session.id}`, { token: caller.token });
    assert.ok(!log.text.includes(SECRET));
  });

  test("an ask policy on an MCP tool pauses the run with requires_action; allow runs it", async () => {
    const { caller, session } = await agentWithServers({ tools__add: "ask" });
    const calls = tools.seen.calls.length;
    scripted.push([use("a1", "tools__add", { a: 2, b: 3 })] as Script, [{ type: "text", text: "5 it is" }]);
    const first = await send(caller.token, session.id, "add");
    assert.deepEqual(
      first.map((f) => f.data.type),
      ["tool_use", "requires_action"],
    );
    const pending = JSON.parse(first.at(-1)!.data.content);
    assert.deepEqual(pending.calls, [{ toolUseId: "a1", name: "tools__add", input: { a: 2, b: 3 } }]);
    assert.equal(tools.seen.calls.length, calls, "nothing called before the answer");
    const answer = await call("POST", `/v1/sessions/${session.id}/tool-decisions`, {
      token: caller.token,
      body: { decisions: [{ toolUseId: "a1", decision: "allow" }] },
    });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.json.resumed, true);
    const rest = await call("GET", `/v1/sessions/${session.id}/events?after=${first.at(-1)!.id}`, {
      token: caller.token,
    });
    const frames = parseSse(rest.text);
    assert.deepEqual(results(frames).a1, { content: "5", isError: false });
    assert.equal(frames.at(-1)?.data.type, "done");
  });

  test("a server that goes away mid-call: an error result, the run goes on; the next run is not offered its tools", async () => {
    const { caller, session } = await agentWithServers();
    scripted.push(
      [
        use("v1", "flaky__vanish"),
        use("v2", "flaky__echo", { text: "still there?" }),
        use("v3", "tools__echo", { text: "ok" }),
      ] as Script,
      [{ type: "text", text: "it went away" }],
    );
    const started = Date.now();
    const frames = await send(caller.token, session.id, "vanish");
    assert.equal(frames.at(-1)?.data.type, "done", JSON.stringify(frames));
    const r = results(frames);
    assert.equal(r.v1?.isError, true, JSON.stringify(r.v1));
    assert.equal(r.v2?.isError, true, JSON.stringify(r.v2));
    assert.deepEqual(r.v3, { content: "echo: ok", isError: false });
    assert.ok(Date.now() - started < 4 * TOOL_TIMEOUT_MS + 5000, "bounded by the timeouts");

    scripted.push([use("d1", "flaky__echo", { text: "again" })] as Script, [{ type: "text", text: "fine" }]);
    const next = await send(caller.token, session.id, "again");
    assert.equal(next.at(-1)?.data.type, "done");
    const offered = scripted.requests.at(-2)!.tools.map((t) => t.name);
    assert.ok(!offered.some((n) => n.startsWith("flaky__")), "a server that is down offers nothing");
    assert.ok(offered.includes("tools__echo"));
    assert.equal(results(next).d1?.isError, true);
    assert.match(results(next).d1!.content, /MCP server \\?"flaky\\?" is unavailable/);
  });

  test("a server that accepts connections but never answers: its tools are left out after the bounded wait, the run goes on", async () => {
    const hung = createServer(() => {});
    await new Promise<void>((resolve) => hung.listen(0, "127.0.0.1", resolve));
    try {
      const caller = h.identity.caller();
      const agent = await call("POST", "/v1/agents", {
        token: caller.token,
        body: {
          name: "H",
          slug: `h-${Math.random()}`,
          model: "scripted/x",
          mcpServers: [
            { name: "hung", url: `http://127.0.0.1:${(hung.address() as AddressInfo).port}/mcp` },
            { name: "tools", url: tools.url, headers: { "X-Api-Key": SECRET } },
          ],
        },
      });
      assert.equal(agent.status, 201, agent.text);
      const session = await call("POST", "/v1/sessions", { token: caller.token, body: { agentId: agent.json.id } });
      scripted.push([use("h1", "hung__anything"), use("h2", "tools__echo", { text: "up" })] as Script, [
        { type: "text", text: "ok" },
      ]);
      const started = Date.now();
      const frames = await send(caller.token, session.json.id, "hung");
      assert.equal(frames.at(-1)?.data.type, "done", JSON.stringify(frames));
      assert.ok(Date.now() - started >= TOOL_TIMEOUT_MS - 100, "waited for the server");
      const offered = scripted.requests.at(-2)!.tools.map((t) => t.name);
      assert.ok(!offered.some((n) => n.startsWith("hung__")) && offered.includes("tools__echo"));
      const r = results(frames);
      assert.equal(r.h1?.isError, true);
      assert.match(r.h1!.content, /MCP server \\"hung\\" is unavailable: no answer within 1.5 s/);
      assert.deepEqual(r.h2, { content: "echo: up", isError: false });
    } finally {
      hung.closeAllConnections();
      hung.close();
    }
  });

  test("a cancel during an MCP call ends the run at once, without waiting for the call's timeout", async () => {
    const { caller, session } = await agentWithServers();
    scripted.push([use("c1", "tools__slow")] as Script);
    const res = fetch(`${h.base}/v1/sessions/${session.id}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${caller.token}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "slow" }] }),
    });
    const slowCalls = () => tools.seen.calls.filter((c) => c.name === "slow").length;
    const before = slowCalls();
    const stream = await res;
    const text = stream.text();
    while (slowCalls() === before) await new Promise((resolve) => setTimeout(resolve, 20));
    const started = Date.now();
    const cancelled = await call("POST", `/v1/sessions/${session.id}/cancel`, { token: caller.token });
    assert.equal(cancelled.status, 200, cancelled.text);
    const frames = parseSse(await text);
    assert.equal(frames.at(-1)?.data.type, "error");
    assert.match(frames.at(-1)!.data.content, /cancelled/);
    assert.ok(Date.now() - started < TOOL_TIMEOUT_MS, "before the call's own timeout");
  });

  test("the header secret is in no log line", () => {
    assert.ok(logs.length > 0);
    assert.ok(!logs.includes(SECRET));
  });
});
