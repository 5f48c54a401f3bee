// test-timeout: 600000
// CORS from a real browser (issue 16 item 4): Debian's Chromium, driven by
// playwright-core, opens a page on one loopback origin that calls identity's
// login, the agents REST API and both SSE streams (agents' send-messages and
// the router's invoke, read with streaming fetch) on the platform's other
// ports. With that origin in CORS_ALLOWED_ORIGINS everything works, headers
// the page needs included; a page on another origin is blocked by the
// browser itself.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type BrowserContext, chromium } from "playwright-core";
import { type Stack, startStack } from "./hostile/stack.ts";

const CHROMIUM = "/usr/bin/chromium";
// Flags that keep Chromium from reaching any outside host (updates, sync,
// field trials) and run it without a display or GPU.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
];

/** A server for a blank page: the origin the browser calls the platform from. */
async function pageServer(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(`<!doctype html><title>console</title><script>${PAGE_SCRIPT}</script>`);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

interface Endpoints {
  identity: string;
  agents: string;
  router: string;
  email: string;
  password: string;
  agentId: string;
}

/**
 * The page's own script (plain JavaScript, served with it): every call a
 * console would make, each result or the error the browser gave.
 */
const PAGE_SCRIPT = String.raw`
async function runCalls(e) {
  const out = {};
  const attempt = async (name, call) => {
    try {
      out[name] = await call();
    } catch (err) {
      out[name] = { blocked: String(err) };
    }
  };
  const readAll = async (res) => {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  };
  let token = "";
  await attempt("login", async () => {
    const res = await fetch(e.identity + "/v1/auth/login", {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "browser-login-1" },
      body: JSON.stringify({ email: e.email, password: e.password }),
    });
    token = (await res.json()).access_token || "";
    return { status: res.status, token: token !== "", requestId: res.headers.get("x-request-id") };
  });
  const auth = { authorization: "Bearer " + token, "content-type": "application/json" };
  let sessionId = "";
  await attempt("createSession", async () => {
    const res = await fetch(e.agents + "/v1/sessions", { method: "POST", headers: auth, body: JSON.stringify({ agentId: e.agentId }) });
    sessionId = (await res.json()).id || "";
    return { status: res.status, requestId: res.headers.get("x-request-id") !== null };
  });
  await attempt("listAgents", async () => {
    const res = await fetch(e.agents + "/v1/agents?limit=5", { headers: { authorization: "Bearer " + token } });
    return { status: res.status, items: ((await res.json()).items || []).length };
  });
  await attempt("agentsStream", async () => {
    const res = await fetch(e.agents + "/v1/sessions/" + sessionId + "/messages", {
      method: "POST",
      headers: { ...auth, accept: "text/event-stream" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hello from the browser" }] }),
    });
    return { status: res.status, type: res.headers.get("content-type"), text: await readAll(res) };
  });
  await attempt("routerStream", async () => {
    const res = await fetch(e.router + "/v1/sessions/" + sessionId + "/invoke", {
      method: "POST",
      headers: { ...auth, "x-request-id": "browser-invoke-1", "last-event-id": "0" },
      body: JSON.stringify({ messages: [{ role: "user", content: "and through the router" }] }),
    });
    return { status: res.status, type: res.headers.get("content-type"), requestId: res.headers.get("x-request-id"), text: await readAll(res) };
  });
  return out;
}
`;

async function runInPage(
  context: BrowserContext,
  origin: string,
  e: Endpoints,
): Promise<Record<string, Record<string, unknown>>> {
  const page = await context.newPage();
  try {
    await page.goto(origin);
    return (await page.evaluate(`runCalls(${JSON.stringify(e)})`)) as Record<string, Record<string, unknown>>;
  } finally {
    await page.close();
  }
}

describe("CORS from Chromium on another origin (real identity, agents and router)", { timeout: 175_000 }, () => {
  let stack: Stack;
  let allowedPage: Awaited<ReturnType<typeof pageServer>>;
  let otherPage: Awaited<ReturnType<typeof pageServer>>;
  let browser: BrowserContext;
  let profile: string;
  let endpoints: Endpoints;

  before(async () => {
    allowedPage = await pageServer();
    otherPage = await pageServer();
    const cors = { CORS_ALLOWED_ORIGINS: allowedPage.origin };
    stack = await startStack({ compute: false, env: cors, router: { corsAllowedOrigins: [allowedPage.origin] } });
    const login = await stack.identity.login();
    const res = await fetch(`${stack.agentsUrl}/v1/agents`, {
      method: "POST",
      headers: { authorization: `Bearer ${login.access_token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "browser", slug: "browser", model: "dev/echo" }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    endpoints = {
      identity: stack.identity.base,
      agents: stack.agentsUrl,
      router: stack.router.url,
      email: "owner@example.com",
      password: "owner-password-1",
      agentId: ((await res.json()) as { id: string }).id,
    };
    profile = mkdtempSync(join(tmpdir(), "cors-chromium-"));
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
    await stack?.close();
    await allowedPage?.close();
    await otherPage?.close();
  });

  test("a page on an allowed origin logs in, uses the agents API and reads both SSE streams", async () => {
    const r = await runInPage(browser, allowedPage.origin, endpoints);
    assert.deepEqual(r.login, { status: 200, token: true, requestId: "browser-login-1" }, JSON.stringify(r));
    assert.deepEqual(r.createSession, { status: 201, requestId: true }, JSON.stringify(r));
    assert.deepEqual(r.listAgents, { status: 200, items: 1 }, JSON.stringify(r));
    assert.equal(r.agentsStream?.status, 200, JSON.stringify(r));
    assert.equal(r.agentsStream?.type, "text/event-stream");
    assert.match(String(r.agentsStream?.text), /"type":"text".*hello from the browser/s);
    assert.match(String(r.agentsStream?.text), /"type":"done"/);
    assert.equal(r.routerStream?.status, 200, JSON.stringify(r));
    assert.equal(r.routerStream?.type, "text/event-stream");
    assert.equal(r.routerStream?.requestId, "browser-invoke-1");
    assert.match(String(r.routerStream?.text), /and through the router[\s\S]*event: turn_done/);
  });

  test("a page on another origin is blocked by the browser at every port", async () => {
    const r = await runInPage(browser, otherPage.origin, endpoints);
    for (const call of ["login", "createSession", "listAgents", "agentsStream", "routerStream"]) {
      assert.match(String(r[call]?.blocked), /TypeError: Failed to fetch/, `${call}: ${JSON.stringify(r[call])}`);
    }
  });
});
