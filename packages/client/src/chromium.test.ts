// test-timeout: 600000
// The SDK in a real browser (issue 24 item 4): the esbuild browser bundle of
// this package, served by a page on its own loopback origin, runs in Debian's
// Chromium (driven by playwright-core) against the real platform started with
// that origin in CORS_ALLOWED_ORIGINS: login and refresh, an API key, agents
// and sessions, a streamed reply through the async iterator (also when the
// stream is cut and rejoined), the router's invoke, and typed errors from both
// envelopes arriving as the bundle's PlatformError.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import * as http from "node:http";
import { createRequire } from "node:module";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type BrowserContext, chromium } from "playwright-core";
import { OWNER, type PlatformStack, startPlatform } from "../../platform/src/testing/platform-stack.ts";

const CHROMIUM = "/usr/bin/chromium";
// No outside host (updates, sync, field trials), no display or GPU: as the runtime's CORS browser test.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
];

// esbuild is tsx's own (the test runner's), as in browser.test.ts.
type Build = (options: Record<string, unknown>) => Promise<{ errors: unknown[]; outputFiles: Array<{ text: string }> }>;
const esbuild = createRequire(createRequire(import.meta.url).resolve("tsx"))("esbuild") as { build: Build };

async function bundle(): Promise<string> {
  const result = await esbuild.build({
    entryPoints: [new URL("./index.ts", import.meta.url).pathname],
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    write: false,
    minify: true,
    logLevel: "silent",
  });
  assert.deepEqual(result.errors, []);
  return result.outputFiles[0]!.text;
}

/**
 * The page's own script: everything an app would do with the SDK, imported
 * from the bundle as a module, each result or the error it threw described
 * in plain data for the test to check.
 */
const PAGE_SCRIPT = `
import * as sdk from "/sdk.js";

const described = (err) => ({
  platformError: err instanceof sdk.PlatformError,
  isPlatformError: sdk.isPlatformError(err),
  name: err && err.name,
  code: err && err.code,
  reason: err && err.reason,
  httpStatus: err && err.httpStatus,
  message: String(err && err.message),
});
const failure = async (p) => {
  try {
    await p;
    return { resolved: true };
  } catch (err) {
    return described(err);
  }
};
const collect = async (it, afterFirst) => {
  const events = [];
  for await (const e of it) {
    events.push(e);
    if (events.length === 1 && afterFirst) await afterFirst();
  }
  return {
    types: events.map((e) => e.type),
    seqs: events.map((e) => String(e.seq)),
    text: events.filter((e) => e.type === "text").map((e) => e.content).join(""),
  };
};

window.runChat = async (e) => {
  const out = {};
  const client = new sdk.PlatformClient({ identity: e.identity, agents: e.agents, router: e.router });
  const first = await client.login(e.email, e.password);
  out.expiresAt = first.expiresAt;
  const renewed = await client.refresh();
  out.refreshed = renewed.refreshToken !== first.refreshToken;
  out.me = (await client.me()).email;
  const agent = await client.agents.create({ name: "Browser", slug: "browser-" + crypto.randomUUID(), model: "dev/echo" });
  const session = await client.sessions.create(agent.id);
  out.reply = await collect(client.sessions.send(session.id, "hello from Chromium"));
  out.replay = await collect(client.sessions.events(session.id));
  out.invoke = [];
  for await (const ev of client.sessions.invoke(session.id, "and through the router")) out.invoke.push(ev);

  out.notFound = await failure(client.agents.get(crypto.randomUUID()));
  out.streamNotFound = await failure(collect(client.sessions.send(crypto.randomUUID(), "hi")));
  out.wrongPassword = await failure(new sdk.PlatformClient(e).login(e.email, "not-the-password"));
  out.unreachable = await failure(new sdk.PlatformClient({ identity: "http://127.0.0.1:9", agents: "http://127.0.0.1:9" }).login(e.email, e.password));

  const key = await client.apiKeys.create({ name: "browser-" + crypto.randomUUID(), scopes: ["read"] });
  const keyed = new sdk.PlatformClient({ identity: e.identity, agents: e.agents, apiKey: key.rawKey });
  out.keyedList = (await keyed.agents.list()).items.some((a) => a.id === agent.id);
  out.keyedCreate = await failure(keyed.agents.create({ name: "x", slug: "x-" + crypto.randomUUID(), model: "dev/echo" }));
  return out;
};

// A reply stream cut by the proxy in front of agents once the page has its first event
// (the page tells the test through its own server): the SDK rejoins it from the browser.
window.runResume = async (e) => {
  const client = new sdk.PlatformClient({ identity: e.identity, agents: e.cutAgents, resume: { delayMs: 50 } });
  await client.login(e.email, e.password);
  const agent = await client.agents.create({ name: "Resume", slug: "resume-" + crypto.randomUUID(), model: "dev/echo" });
  const session = await client.sessions.create(agent.id);
  const text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen";
  const got = await collect(client.sessions.send(session.id, text), () => fetch("/cut", { method: "POST" }));
  const { events } = await client.sessions.get(session.id);
  const userAt = events.findIndex((ev) => ev.type === "user");
  return { got, log: events.slice(userAt + 1).map((ev) => String(ev.seq)) };
};
window.ready = true;
`;

/** The page's origin: a blank page that loads the bundle and PAGE_SCRIPT as modules. */
async function pageServer(sdk: string): Promise<{ origin: string; onCut?: () => boolean; close(): Promise<void> }> {
  const page: { onCut?: () => boolean } = {};
  const server = http.createServer((req, res) => {
    if (req.url === "/cut") {
      res.writeHead(page.onCut?.() ? 204 : 409);
      res.end();
      return;
    }
    if (req.url === "/sdk.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(sdk);
      return;
    }
    if (req.url === "/page.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(PAGE_SCRIPT);
      return;
    }
    res.writeHead(200, { "content-type": "text/html" });
    res.end(`<!doctype html><title>sdk</title><script type="module" src="/page.js"></script>`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  return Object.assign(page, {
    origin: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

/**
 * A TCP proxy to `target` that holds the first reply stream (POST .../messages)
 * right after its first whole event (cutPrefix), however the server's writes
 * were split into TCP chunks: nothing more of it is passed on, and `cut()`
 * destroys both sides (once the page has that event: a browser may drop what
 * arrived just before a connection error). Keeps each request line and
 * Last-Event-ID.
 */
async function cuttingProxy(target: string) {
  const { hostname, port } = new URL(target);
  const requests: string[] = [];
  let held: (() => void) | undefined;
  let lastPassedId: string | undefined;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    let armed = false;
    let answer = Buffer.alloc(0);
    client.on("data", (chunk: Buffer) => {
      const head = chunk.toString("latin1");
      const line = /^(GET|POST|PATCH|DELETE|PUT|OPTIONS) (\S+) HTTP/.exec(head);
      if (line) {
        const lastId = /\r\nlast-event-id: *(\S+)/i.exec(head)?.[1];
        requests.push(`${line[1]} ${line[2]}${lastId ? ` last-event-id=${lastId}` : ""}`);
        armed = !held && line[1] === "POST" && /\/messages$/.test(line[2]!);
        answer = Buffer.alloc(0);
      }
      upstream.write(chunk);
    });
    let holding = false;
    upstream.on("data", (chunk: Buffer) => {
      if (holding) return;
      if (!armed) {
        client.write(chunk);
        return;
      }
      answer = Buffer.concat([answer, chunk]);
      // Held until the first event is whole; then only it goes through (the server may write a whole burst, even
      // the whole reply, as one chunk: the cut must still come after the first event, not after the chunk).
      const prefix = cutPrefix(answer.toString("latin1"));
      if (prefix === undefined) return;
      armed = false;
      holding = true;
      client.write(Buffer.from(prefix, "latin1"));
      lastPassedId = [...prefix.matchAll(/^id: *(\S+)$/gm)].at(-1)?.[1];
      held = () => {
        client.destroy();
        upstream.destroy();
      };
    });
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => holding || client.destroy());
    client.on("close", () => upstream.destroy());
    // A held stream is ended by cut() only, even if the run finishes first.
    upstream.on("close", () => holding || client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: p } = server.address() as net.AddressInfo;
  const cut = () => {
    if (!held) return false;
    held();
    return true;
  };
  return {
    url: `http://127.0.0.1:${p}`,
    requests,
    cut,
    /** The id of the last event the cut stream let through. */
    lastPassedId: () => lastPassedId,
    close: () => server.close(),
  };
}

/**
 * What of an answer (`text`, its bytes as latin1) goes through before the
 * cut: its head and its first whole event with an id, as one chunk frame
 * when the body is chunked (so the browser is given a well-formed prefix of
 * the body, not half a frame it may hold back); undefined until the first
 * event has arrived.
 */
function cutPrefix(text: string): string | undefined {
  const bodyAt = text.indexOf("\r\n\r\n") + 4;
  if (bodyAt < 4) return undefined;
  const eventEnd = (data: string) => {
    const id = /^id: /m.exec(data);
    return id ? data.indexOf("\n\n", id.index) : -1;
  };
  if (!/\r\ntransfer-encoding: *chunked/i.test(text.slice(0, bodyAt))) {
    const end = eventEnd(text.slice(bodyAt));
    return end < 0 ? undefined : text.slice(0, bodyAt + end + 2);
  }
  let data = "";
  for (let at = bodyAt; ; ) {
    const lineEnd = text.indexOf("\r\n", at);
    if (lineEnd < 0) return undefined;
    const size = Number.parseInt(text.slice(at, lineEnd), 16);
    const frameEnd = lineEnd + 2 + size + 2;
    if (size === 0 || frameEnd > text.length) return undefined;
    data += text.slice(lineEnd + 2, lineEnd + 2 + size);
    at = frameEnd;
    const end = eventEnd(data);
    if (end >= 0) {
      const first = data.slice(0, end + 2);
      return `${text.slice(0, bodyAt)}${first.length.toString(16)}\r\n${first}\r\n`;
    }
  }
}

type Described = { platformError: boolean; name: string; code: number; reason: string; httpStatus: number };
type Collected = { types: string[]; seqs: string[]; text: string };

describe("the SDK's browser bundle in Chromium against the real platform", { timeout: 400_000 }, () => {
  let stack: PlatformStack;
  let page: Awaited<ReturnType<typeof pageServer>>;
  let browser: BrowserContext;
  let profile: string;

  before(async () => {
    page = await pageServer(await bundle());
    stack = await startPlatform({ env: { CORS_ALLOWED_ORIGINS: page.origin } });
    profile = mkdtempSync(join(tmpdir(), "client-chromium-"));
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      timeout: 60_000,
    });
  });
  after(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await stack?.stop();
    await page?.close();
  });

  async function inPage(fn: string, arg: Record<string, string>): Promise<Record<string, unknown>> {
    const tab = await browser.newPage();
    const errors: string[] = [];
    tab.on("pageerror", (err) => errors.push(String(err)));
    try {
      await tab.goto(page.origin);
      await tab.waitForFunction("window.ready === true", undefined, { timeout: 30_000 });
      return (await tab.evaluate(`${fn}(${JSON.stringify(arg)})`)) as Record<string, unknown>;
    } catch (err) {
      throw new Error(`${(err as Error).message}\npage errors: ${errors.join("\n")}\n${stack.logs()}`);
    } finally {
      await tab.close();
    }
  }

  const endpoints = () => ({
    identity: stack.endpoints.identity,
    agents: stack.endpoints.agents,
    router: stack.endpoints.router,
    email: OWNER.email,
    password: OWNER.password,
  });

  test("login, refresh, an agent and a session, the streamed reply, invoke, an API key, typed errors", async () => {
    const r = await inPage("runChat", endpoints());
    const all = JSON.stringify(r);
    assert.ok(Number(r.expiresAt) > Date.now(), all);
    assert.equal(r.refreshed, true, "the refresh token rotated");
    assert.equal(r.me, OWNER.email);
    const reply = r.reply as Collected;
    assert.equal(reply.text, "echo: hello from Chromium", all);
    assert.equal(reply.types.at(-1), "done");
    assert.ok(reply.types.includes("text"));
    const replay = r.replay as Collected;
    assert.deepEqual(replay.types, ["other", ...reply.types], "the log replayed: the user message, then the reply");
    assert.deepEqual(replay.seqs.slice(1), reply.seqs);
    const invoke = r.invoke as Array<{ type: string; content?: string }>;
    assert.equal(invoke.at(-1)?.type, "turn_done", all);
    assert.equal(
      invoke.flatMap((e) => (e.type === "text" ? [e.content] : [])).join(""),
      "echo: and through the router",
    );

    // Typed errors: the bundle's own PlatformError class, with the reason of each envelope.
    const notFound = r.notFound as Described;
    assert.deepEqual(
      { ...notFound, message: undefined },
      {
        platformError: true,
        isPlatformError: true,
        name: "PlatformError",
        code: 5,
        reason: "not_found",
        httpStatus: 404,
        message: undefined,
      },
      all,
    );
    assert.deepEqual(
      pick(r.streamNotFound as Described),
      { platformError: true, code: 5, reason: "not_found", httpStatus: 404 },
      all,
    );
    assert.deepEqual(
      pick(r.wrongPassword as Described),
      { platformError: true, code: 16, reason: "unauthenticated", httpStatus: 401 },
      all,
    );
    assert.deepEqual(
      pick(r.unreachable as Described),
      { platformError: true, code: 14, reason: "unreachable", httpStatus: undefined },
      all,
    );
    assert.equal(r.keyedList, true, "the API key lists the agent");
    assert.deepEqual(
      pick(r.keyedCreate as Described),
      { platformError: true, code: 7, reason: "insufficient_scope", httpStatus: 403 },
      all,
    );
  });

  test("a reply stream cut after its first event is rejoined from the browser: every event once, in order", async (t) => {
    const proxy = await cuttingProxy(stack.endpoints.agents);
    let cuts = 0;
    page.onCut = () => {
      const held = proxy.cut();
      if (held) cuts++;
      return held;
    };
    try {
      const r = await inPage("runResume", { ...endpoints(), cutAgents: proxy.url });
      const { got, log } = r as { got: Collected; log: string[] };
      assert.equal(cuts, 1, proxy.requests.join("\n"));
      const rejoins = proxy.requests.filter((q) => /^GET \/v1\/sessions\/[^/]+\/events last-event-id=\d+$/.test(q));
      assert.ok(rejoins.length >= 1, proxy.requests.join("\n"));
      assert.deepEqual(got.seqs, log, JSON.stringify(r));
      // The rejoin continues after the one event that got through.
      const passed = proxy.lastPassedId();
      assert.ok(passed !== undefined && got.seqs.includes(passed), `${passed} in ${got.seqs}`);
      assert.notEqual(passed, got.seqs.at(-1), "the cut came before the end of the reply");
      assert.match(rejoins[0]!, new RegExp(`last-event-id=${passed}$`), rejoins.join("\n"));
      assert.ok(got.seqs.length >= 4, JSON.stringify(got));
      assert.equal(got.types.at(-1), "done");
      assert.equal(
        got.text,
        "echo: one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen",
      );
      t.diagnostic(`${got.seqs.length} events (${got.types.join(" ")}), rejoined: ${rejoins.join(", ")}`);
    } finally {
      page.onCut = undefined;
      proxy.close();
    }
  });
});

function pick(d: Described) {
  return { platformError: d.platformError, code: d.code, reason: d.reason, httpStatus: d.httpStatus };
}
