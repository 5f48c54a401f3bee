// test-timeout: 600000
// The SDK against identity, compute, agents and the router started by the
// test (the dev model): the README's chat exactly as written, token refresh,
// typed errors from both envelopes, and a reply stream cut by a TCP proxy.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { OWNER, type PlatformStack, startPlatform } from "../../platform/src/testing/platform-stack.ts";
import {
  type ChatEvent,
  Code,
  jwtExpiry,
  PlatformClient,
  type PlatformClientOptions,
  PlatformError,
  type Tokens,
} from "./index.ts";

const pkg = new URL("..", import.meta.url).pathname;
let stack: PlatformStack;

before(async () => {
  stack = await startPlatform();
});
after(async () => {
  await stack?.stop();
});

function client(options: Partial<PlatformClientOptions> = {}): PlatformClient {
  return new PlatformClient({ identity: stack.endpoints.identity, agents: stack.endpoints.agents, ...options });
}

/** A fetch that records each request (method, path, authorization) and its status. */
function recordingFetch() {
  const calls: Array<{ method: string; path: string; auth: string | null; status: number }> = [];
  const f: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const url = new URL(String(input));
    calls.push({
      method: init?.method ?? "GET",
      path: url.pathname,
      auth: new Headers(init?.headers).get("authorization"),
      status: res.status,
    });
    return res;
  };
  return { fetch: f, calls };
}

/** The JWT with its payload changed (the signature no longer matches: a forgery). */
function forge(token: string, claims: Record<string, unknown>): string {
  const [h, p, s] = token.split(".") as [string, string, string];
  const payload = { ...JSON.parse(Buffer.from(p, "base64url").toString()), ...claims };
  return `${h}.${Buffer.from(JSON.stringify(payload)).toString("base64url")}.${s}`;
}

async function rejects(p: Promise<unknown>): Promise<PlatformError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof PlatformError, `not a PlatformError: ${err}`);
    return err;
  }
  assert.fail("expected an error");
}

describe("README", () => {
  test("the chat example runs as written and prints the streamed reply", async () => {
    const readme = readFileSync(join(pkg, "README.md"), "utf8");
    const m = /<!-- example:chat -->\n```ts\n([\s\S]*?)```/.exec(readme);
    assert.ok(m, "the README has the example block");
    const code = m[1]!;
    assert.ok(code.trimEnd().split("\n").length <= 20, "at most 20 lines");
    // Inside the package, so `@platform/client` resolves to it (a package's self-reference).
    const dir = join(pkg, ".readme-example");
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `chat-${process.pid}.ts`);
    writeFileSync(file, code);
    try {
      const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, ["--import", "tsx", file], {
          cwd: pkg,
          env: {
            PATH: process.env.PATH ?? "",
            HOME: process.env.HOME ?? "",
            PLATFORM_IDENTITY_URL: stack.endpoints.identity,
            PLATFORM_AGENTS_URL: stack.endpoints.agents,
            PLATFORM_EMAIL: OWNER.email,
            PLATFORM_PASSWORD: OWNER.password,
          },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        child.on("close", (c) => resolve({ code: c, stdout, stderr }));
      });
      assert.equal(out.code, 0, out.stderr);
      assert.equal(out.stdout, "echo: hello from the SDK\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("login and refresh", () => {
  test("an expired access token is refreshed before the call, which succeeds", async () => {
    const first = client();
    const tokens = await first.login(OWNER.email, OWNER.password);
    assert.ok(tokens.expiresAt > Date.now() + 60_000, "expiry read from the JWT");
    const expired = forge(tokens.accessToken, { exp: Math.floor(Date.now() / 1000) - 10 });
    const seen: Array<Tokens | undefined> = [];
    const rec = recordingFetch();
    const c = client({
      fetch: rec.fetch,
      tokens: { ...tokens, accessToken: expired, expiresAt: jwtExpiry(expired)! },
      onTokens: (t) => seen.push(t),
    });
    const page = await c.agents.list({ limit: 1 });
    assert.ok(Array.isArray(page.items));
    assert.deepEqual(
      rec.calls.map((r) => `${r.method} ${r.path} ${r.status}`),
      ["POST /v1/auth/refresh 200", "GET /v1/agents 200"],
    );
    assert.ok(!rec.calls.some((r) => r.auth?.includes(expired)), "the expired token was never sent");
    assert.equal(seen.length, 1);
    assert.notEqual(seen[0]!.refreshToken, tokens.refreshToken, "rotated");
    assert.equal(c.tokens, seen[0]);
  });

  test("a forged access token gets a 401, is refreshed once and the call is sent again", async () => {
    const tokens = await client().login(OWNER.email, OWNER.password);
    const forged = forge(tokens.accessToken, { sub: randomUUID() });
    const rec = recordingFetch();
    const c = client({ fetch: rec.fetch, tokens: { ...tokens, accessToken: forged } });
    // Concurrent calls: one refresh between them (a refresh token is single-use).
    const results = await Promise.all([c.agents.list(), c.agents.list(), c.me(), c.sessions.list()]);
    assert.equal(results.length, 4);
    assert.equal((results[2] as { email: string }).email, OWNER.email);
    assert.equal(rec.calls.filter((r) => r.path === "/v1/auth/refresh").length, 1, JSON.stringify(rec.calls));
    assert.ok(rec.calls.some((r) => r.status === 401 && r.auth === `Bearer ${forged}`));
    assert.notEqual(c.tokens?.accessToken, forged);
  });

  test("a reused refresh token: refresh_token_reused with action re_authenticate, and the client is signed out", async () => {
    const tokens = await client().login(OWNER.email, OWNER.password);
    const a = client({ tokens });
    await a.refresh();
    const seen: Array<Tokens | undefined> = [];
    const b = client({ tokens: { ...tokens, expiresAt: 0 }, onTokens: (t) => seen.push(t) });
    const e = await rejects(b.agents.list());
    assert.equal(e.reason, "refresh_token_reused");
    assert.equal(e.code, Code.Unauthenticated);
    assert.equal(e.httpStatus, 401);
    assert.equal(e.extra.action, "re_authenticate");
    assert.equal(b.tokens, undefined);
    assert.deepEqual(seen, [undefined]);
  });

  test("logout revokes the refresh token; an API key works instead", async () => {
    const c = client();
    const tokens = await c.login(OWNER.email, OWNER.password);
    const key = await c.apiKeys.create({ name: `sdk-${randomUUID()}`, scopes: ["read"] });
    assert.match(key.rawKey, /^sk_/);
    await c.logout();
    assert.equal(c.tokens, undefined);
    const again = client({ tokens: { ...tokens, expiresAt: 0 } });
    assert.equal((await rejects(again.agents.list())).reason, "refresh_token_invalid");
    const k = client({ apiKey: key.rawKey });
    assert.ok(Array.isArray((await k.agents.list()).items));
    // The key has `read` only: the agents envelope's reason beside its code.
    const denied = await rejects(k.agents.create({ name: "x", slug: `x-${randomUUID()}`, model: "dev/echo" }));
    assert.equal(denied.code, Code.PermissionDenied);
    assert.equal(denied.reason, "insufficient_scope");
    assert.equal(denied.httpStatus, 403);
  });
});

describe("typed errors", () => {
  test("agents: 404 not_found, 409 already_exists, 400 invalid_argument", async () => {
    const c = client();
    await c.login(OWNER.email, OWNER.password);
    const missing = await rejects(c.agents.get(randomUUID()));
    assert.equal(missing.code, Code.NotFound);
    assert.equal(missing.reason, "not_found");
    assert.equal(missing.httpStatus, 404);
    assert.ok(missing.message.length > 0);
    const slug = `dup-${randomUUID()}`;
    await c.agents.create({ name: "a", slug, model: "dev/echo" });
    const dup = await rejects(c.agents.create({ name: "b", slug, model: "dev/echo" }));
    assert.equal(dup.reason, "already_exists");
    assert.equal(dup.httpStatus, 409);
    const bad = await rejects(c.sessions.create("not-a-uuid"));
    assert.equal(bad.code, Code.InvalidArgument);
    assert.equal(bad.httpStatus, 400);
    const gone = await rejects(collect(c.sessions.send(randomUUID(), "hi")));
    assert.equal(gone.reason, "not_found");
  });

  test("identity: 401 unauthenticated on a wrong password; an unreachable service", async () => {
    const wrong = await rejects(client().login(OWNER.email, "not-the-password"));
    assert.equal(wrong.code, Code.Unauthenticated);
    assert.equal(wrong.reason, "unauthenticated");
    assert.equal(wrong.httpStatus, 401);
    const nowhere = new PlatformClient({ identity: "http://127.0.0.1:9", agents: "http://127.0.0.1:9" });
    const down = await rejects(nowhere.login(OWNER.email, OWNER.password));
    assert.equal(down.code, Code.Unavailable);
    assert.equal(down.reason, "unreachable");
  });
});

async function collect(it: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const out: ChatEvent[] = [];
  for await (const e of it) out.push(e);
  return out;
}

/**
 * A TCP proxy to `target` that cuts connections carrying an event stream:
 * the first `cuts` of them are destroyed (both sides) right after the chunk
 * of the answer holding their `after`-th event id line has been forwarded
 * (0: after the first chunk of the answer, whatever it holds). Keeps the
 * request line and Last-Event-ID of every request it saw.
 */
async function cuttingProxy(target: string, cuts: number[]) {
  const { hostname, port } = new URL(target);
  const requests: string[] = [];
  let cutsDone = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(port), hostname);
    let streaming = false;
    let ids = 0;
    let sawAnswer = false;
    client.on("data", (chunk: Buffer) => {
      const head = chunk.toString("latin1");
      const line = /^(GET|POST|PATCH|DELETE|PUT) (\S+) HTTP/.exec(head);
      if (line) {
        const lastId = /\r\nlast-event-id: *(\S+)/i.exec(head)?.[1];
        requests.push(`${line[1]} ${line[2]}${lastId ? ` last-event-id=${lastId}` : ""}`);
        streaming = /\/messages$|\/events(\?|$)/.test(line[2]!) && cutsDone < cuts.length;
        ids = 0;
        sawAnswer = false;
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      client.write(chunk);
      if (!streaming) return;
      ids += (chunk.toString("utf8").match(/^id: /gm) ?? []).length;
      const want = cuts[cutsDone]!;
      if ((want === 0 && !sawAnswer) || (want > 0 && ids >= want)) {
        cutsDone++;
        streaming = false;
        client.destroy();
        upstream.destroy();
      }
      sawAnswer = true;
    });
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: p } = server.address() as net.AddressInfo;
  return { url: `http://127.0.0.1:${p}`, requests, cutsDone: () => cutsDone, close: () => server.close() };
}

describe("resume", () => {
  // A run with many events spread over time: tool output lines, then the summary's text fragments.
  const command = "run: for i in 1 2 3 4 5 6; do echo line $i; sleep 0.2; done";

  for (const [name, cuts] of [
    ["cut mid-stream twice (the send, then the first rejoin)", [2, 2]],
    ["cut right after the answer's first bytes", [0]],
  ] as const) {
    test(`every event exactly once: ${name}`, async (t) => {
      const proxy = await cuttingProxy(stack.endpoints.agents, [...cuts]);
      try {
        const c = client({ agents: proxy.url, resume: { delayMs: 50 } });
        await c.login(OWNER.email, OWNER.password);
        const agent = await c.agents.create({ name: "resume", slug: `resume-${randomUUID()}`, model: "dev/echo" });
        const session = await c.sessions.create(agent.id);
        const got = await collect(c.sessions.send(session.id, command));
        assert.ok(proxy.cutsDone() >= 1, "the stream was cut");
        const rejoins = proxy.requests.filter((r) => r.includes(`/v1/sessions/${session.id}/events`));
        assert.ok(rejoins.length >= 1, proxy.requests.join("\n"));
        assert.ok(
          rejoins.every((r) => /last-event-id=\d+/.test(r)),
          rejoins.join("\n"),
        );
        // What the session's log holds after the message is what was yielded, in order, once each.
        const { events } = await c.sessions.get(session.id);
        const userAt = events.findIndex((e) => e.type === "user");
        const log = events.slice(userAt + 1).map((e) => `${e.seq} ${e.type}`);
        assert.deepEqual(
          got.map((e) => `${e.seq} ${e.type === "other" ? e.name : e.type}`),
          log,
        );
        assert.equal(got.at(-1)?.type, "done");
        t.diagnostic(`${got.length} events, ${proxy.cutsDone()} cut(s), rejoined: ${rejoins.join(", ")}`);
        const text = got.flatMap((e) => (e.type === "text" ? [e.content] : [])).join("");
        assert.match(text, /line 6/);
        const outputs = got.flatMap((e) => (e.type === "tool_output" ? [e.stdout ?? ""] : [])).join("");
        assert.match(outputs, /line 1\n[\s\S]*line 6\n/);
      } finally {
        proxy.close();
      }
    });
  }
});

describe("rejoin and the router", () => {
  test("events() replays a finished run from the log and ends with it", async () => {
    const c = client();
    await c.login(OWNER.email, OWNER.password);
    const agent = await c.agents.create({ name: "replay", slug: `replay-${randomUUID()}`, model: "dev/echo" });
    const session = await c.sessions.create(agent.id);
    const sent = await collect(c.sessions.send(session.id, "one two three"));
    const replayed = await collect(c.sessions.events(session.id));
    assert.deepEqual(
      replayed.map((e) => (e.type === "other" ? e.name : e.type)),
      ["user", ...sent.map((e) => e.type)],
    );
    const later = await collect(c.sessions.events(session.id, { after: sent[0]!.seq }));
    assert.deepEqual(later, sent.slice(1));
  });

  test("invoke through the router: text chunks, then turn_done", async () => {
    const c = client({ router: stack.endpoints.router });
    await c.login(OWNER.email, OWNER.password);
    const agent = await c.agents.create({ name: "router", slug: `router-${randomUUID()}`, model: "dev/echo" });
    const session = await c.sessions.create(agent.id);
    const got: string[] = [];
    let text = "";
    for await (const e of c.sessions.invoke(session.id, "hello router")) {
      got.push(e.type);
      if (e.type === "text") text += e.content;
    }
    assert.equal(got.at(-1), "turn_done");
    assert.equal(text, "echo: hello router");
  });
});

describe("send modes", () => {
  test("interrupt stops the running run and is taken next; reject is 409 while a run holds the session", async () => {
    const c = client();
    await c.login(OWNER.email, OWNER.password);
    const agent = await c.agents.create({ name: "modes", slug: `modes-${randomUUID()}`, model: "dev/echo" });
    const session = await c.sessions.create(agent.id);
    const first = c.sessions.send(session.id, "run: echo started; sleep 30");
    const firstEvents: ChatEvent[] = [];
    // Until the command is under way.
    for (;;) {
      const next = await first.next();
      assert.ok(!next.done, "the first run ended before its command ran");
      firstEvents.push(next.value);
      if (next.value.type === "tool_output") break;
    }
    const refused = await rejects(collect(c.sessions.send(session.id, "not now", { mode: "reject" })));
    assert.equal(refused.code, Code.Aborted);
    assert.equal(refused.httpStatus, 409);
    const started = performance.now();
    const second = await collect(c.sessions.send(session.id, "stop that", { mode: "interrupt" }));
    const ms = performance.now() - started;
    for await (const e of first) firstEvents.push(e);
    // The interrupted run: its command stopped (an error result), the run ended with the interrupt's error.
    const last = firstEvents.at(-1)!;
    assert.equal(last.type, "error");
    assert.match((last as { content: string }).content, /interrupted by a new message/);
    assert.ok(
      firstEvents.some((e) => e.type === "tool_result" && e.isError),
      firstEvents.map((e) => e.type).join(" "),
    );
    // The interrupting send: its message_queued event (mode interrupt), then its own run to its end.
    const queued = second[0]!;
    assert.ok(queued.type === "other" && queued.name === "message_queued", JSON.stringify(queued));
    assert.equal(JSON.parse((queued as { content: string }).content).mode, "interrupt");
    assert.equal(second.at(-1)!.type, "done");
    assert.equal(
      second
        .filter((e) => e.type === "text")
        .map((e) => (e as { content: string }).content)
        .join(""),
      "echo: stop that",
    );
    // Not after the 30 s sleep (as an enqueued send would be).
    assert.ok(ms < 20_000, `the interrupting send took ${ms.toFixed(0)} ms`);
    console.log(`interrupt: the interrupting send's stream ended ${ms.toFixed(0)} ms after it was sent`);
  });
});
