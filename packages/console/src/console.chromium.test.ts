// test-timeout: 400000
// The web console (issue 23) in Debian's Chromium, driven by playwright-core,
// against the real platform started here: the router serves the built console
// at / and passes identity's and agents' REST/SSE paths through (one origin).
// Every screen is used as a person would, assertions read what is on the
// screen, and a screenshot of each main screen goes to test-artifacts/console/.
import assert from "node:assert/strict";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { OWNER, type PlatformStack, startPlatform } from "../../platform/src/testing/platform-stack.ts";
import { buildConsole, CONSOLE_DIST } from "./build.ts";

const ARTIFACTS = new URL("../../../test-artifacts/console/", import.meta.url).pathname;
// No outside host (updates, sync, field trials), no display or GPU: as the SDK's browser test.
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--disable-background-networking",
  "--disable-component-update",
  "--no-first-run",
  "--disable-sync",
];

/** What the page functions read (the test is typed for Node, without the DOM's types). */
type Browserish = {
  navigator: { clipboard: { readText(): Promise<string> } };
  document: { documentElement: { scrollWidth: number } };
  sessionStorage: { length: number };
};

describe("the web console in Chromium against the real platform", { timeout: 380_000 }, () => {
  let stack: PlatformStack;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let origin: string;
  let token: string;
  const pageErrors: string[] = [];
  const rejoins: string[] = [];

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    const buildMs = buildConsole();
    const started = performance.now();
    stack = await startPlatform({
      // The key MCP servers' header values are sealed with.
      env: { ROUTER_CONSOLE_DIR: CONSOLE_DIST, AGENTS_SECRETS_KEY: randomBytes(32).toString("hex") },
    });
    origin = stack.endpoints.router;
    browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: CHROMIUM_ARGS });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin });
    page = await context.newPage();
    page.setDefaultTimeout(20_000);
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    page.on("dialog", (d) => void d.accept());
    page.on("request", (r) => {
      if (/\/v1\/sessions\/[^/]+\/events$/.test(new URL(r.url()).pathname)) {
        rejoins.push(`${new URL(r.url()).pathname} last-event-id=${r.headers()["last-event-id"]}`);
      }
    });
    token = await login();
    console.log(
      `console build ${(buildMs / 1000).toFixed(1)} s; platform + browser up in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
  });

  async function login(): Promise<string> {
    const res = await fetch(`${stack.endpoints.identity}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: OWNER.email, password: OWNER.password }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { access_token: string }).access_token;
  }
  async function api(method: string, base: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        ...(method === "GET" ? {} : { "idempotency-key": randomUUID() }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    assert.ok(res.ok, `${method} ${path}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  }
  // The screens build on each other (the agent made here is chatted with there): after a failure the
  // later steps are skipped, so the first failure is the one reported.
  let failed = "";
  const step = (name: string, fn: () => Promise<void>) =>
    test(name, async (t) => {
      if (failed) return t.skip(`after the failure of: ${failed}`);
      try {
        await fn();
      } catch (err) {
        failed = name;
        await shot(`failed-${name.slice(0, 30).replace(/\W+/g, "-")}`).catch(() => {});
        throw err;
      }
    });
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  const text = async (selector: string) => (await page.locator(selector).allTextContents()).join("\n");
  /** The chat's run has ended: its Send button is back (during a run the composer interrupts). */
  const idle = () => page.getByRole("button", { name: "Send", exact: true }).waitFor({ timeout: 60_000 });
  const failureContext = () => `page errors: ${pageErrors.join("\n")}\n${stack.logs()}`;

  step("the router serves the console with a strict CSP and passes the APIs through on its own origin", async () => {
    const index = await fetch(`${origin}/`);
    assert.equal(index.status, 200);
    const csp = index.headers.get("content-security-policy") ?? "";
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /connect-src 'self'(;|$)/);
    assert.match(csp, /frame-ancestors 'none'/);
    const html = await index.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, "no inline script");
    // An app route is the app's page; a missing asset is a 404.
    assert.equal((await fetch(`${origin}/agents/anything`)).status, 200);
    assert.equal((await fetch(`${origin}/assets/missing.js`)).status, 404);
    // identity's and agents' paths, through the router; its own routes and documents stay its own.
    assert.equal((await fetch(`${origin}/v1/agents`)).status, 401);
    const me = await fetch(`${origin}/v1/users/me`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(me.status, 200);
    assert.equal(((await me.json()) as { email: string }).email, OWNER.email);
    const doc = (await (await fetch(`${origin}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    assert.ok(
      Object.keys(doc.paths).some((p) => p.endsWith("/invoke")),
      "the router's own document",
    );
    assert.equal((await fetch(`${origin}/v1/nothing-here`)).status, 404);
    // Same-origin calls need no CORS; another origin's preflight is still refused (deny by default).
    const preflight = await fetch(`${origin}/v1/agents`, {
      method: "OPTIONS",
      headers: { origin: "http://evil.example", "access-control-request-method": "GET" },
    });
    assert.equal(preflight.status, 403);
  });

  step("sign in with the keyboard, who am I, switch organization", async () => {
    const other = await api("POST", stack.endpoints.identity, "/v1/orgs", { name: "Second Org" });
    const secondId = ((other.org ?? other) as { id: string }).id;
    await page.goto(origin);
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    await shot("01-sign-in");
    await page.getByLabel("Email").focus();
    await page.keyboard.type(OWNER.email);
    await page.keyboard.press("Tab");
    await page.keyboard.type("wrong-password");
    await page.keyboard.press("Enter");
    await page.getByRole("alert").waitFor();
    assert.match(await text("[role=alert]"), /unauthenticated|invalid|password/i);
    await page.getByLabel("Password").fill("");
    await page.getByLabel("Password").focus();
    await page.keyboard.type(OWNER.password);
    await page.keyboard.press("Enter");
    await page.getByTestId("whoami").getByText(OWNER.email).waitFor();
    // The CSP holds in the page: a string evaluated as script is refused.
    // (Playwright polls a string predicate with eval in the page: refused, where a page without the CSP
    // would wait out the timeout instead.)
    await assert.rejects(
      page.waitForFunction("window.neverSet === 1", undefined, { timeout: 3000, polling: 100 }),
      /unsafe-eval/,
    );
    const org = page.getByLabel("Organization");
    assert.match(await org.locator("option:checked").innerText(), /CLI Org \(owner\)/);
    const switched = () => page.waitForResponse((r) => r.url().endsWith("/v1/users/me/orgs") && r.ok());
    await Promise.all([switched(), org.selectOption(secondId)]);
    await page.getByText("No agents yet.").waitFor();
    assert.match(await org.locator("option:checked").innerText(), /Second Org/);
    // Back to the first organization for the rest.
    await Promise.all([switched(), org.selectOption({ label: "CLI Org (owner)" })]);
    assert.match(await org.locator("option:checked").innerText(), /CLI Org/);
  });

  step("agents: a paginated list, create, view and edit (model, prompt, tool permissions, MCP servers)", async () => {
    for (let i = 0; i < 11; i++) {
      await api("POST", stack.endpoints.agents, "/v1/agents", {
        name: `Bulk ${String(i).padStart(2, "0")}`,
        slug: `bulk-${i}-${Date.now()}`,
        model: "dev/echo",
      });
    }
    // The list was read before these were made: a reload reads it again.
    await page.goto(`${origin}/#/agents`);
    await page.reload();
    await page.getByRole("heading", { name: "Agents" }).waitFor();
    await page.getByRole("link", { name: /^Bulk/ }).first().waitFor();
    assert.equal(await page.locator("tbody tr").count(), 10, "a page of 10");
    await shot("02-agents");
    await page.getByRole("button", { name: "Next page" }).click();
    await page.getByText("Page 2").waitFor();
    await page.locator("tbody tr").nth(1).waitFor({ state: "detached" });
    await page.getByRole("button", { name: "Previous page" }).click();
    await page.locator("tbody tr").nth(9).waitFor();

    await page.getByRole("button", { name: "New agent" }).click();
    await page.getByLabel("Name").fill("Console helper");
    await page.getByLabel("Slug").fill(`console-${Date.now()}`);
    await page.getByLabel("System prompt").fill("Be brief.");
    await page.getByRole("button", { name: "Create agent" }).click();
    await page.getByRole("heading", { name: "Console helper" }).waitFor();
    assert.equal(await page.getByLabel("System prompt").inputValue(), "Be brief.");
    await page.getByLabel("System prompt").fill("Be very brief.");
    await page.getByLabel("Add a server: name").fill("docs");
    await page.getByLabel("URL").fill("https://mcp.example.invalid/mcp");
    await page.getByLabel(/^Headers/).fill("Authorization: Bearer not-shown");
    await page.getByRole("button", { name: "Save agent" }).click();
    await page.getByRole("status").getByText("Saved.").waitFor();
    await page.getByRole("button", { name: "Remove docs" }).waitFor();
    assert.match(await text("fieldset"), /docs\s+https:\/\/mcp\.example\.invalid\/mcp\s+headers: Authorization/);
    assert.doesNotMatch(await page.content(), /not-shown/, "header values are never shown back");
    await shot("03-agent");
    // What the API now holds.
    const id = new URL(page.url()).hash.split("/")[2]!;
    const got = await api("GET", stack.endpoints.agents, `/v1/agents/${id}`);
    const agent = (got.agent ?? got) as Record<string, unknown>;
    assert.equal(agent.system_prompt ?? agent.systemPrompt, "Be very brief.");
    // The chats below run without it (its host does not exist).
    await page.getByRole("button", { name: "Remove docs" }).click();
    await page.getByText("None.").waitFor();
  });

  step("chat: a streamed reply, a tool call's block, a reload mid-run rejoins without loss or doubling", async () => {
    await page.getByRole("button", { name: /New chat with Console helper/ }).click();
    await page.getByRole("heading", { name: "Chat" }).waitFor();
    const input = page.getByLabel("Message");
    await input.fill("hello from the console");
    await input.press("Enter");
    await page.getByTestId("reply").getByText("echo: hello from the console").waitFor();
    await page.getByText(/done · \d+ tokens in/).waitFor();

    // The composer takes a message during a run too (it would interrupt): wait for the run's end.
    await idle();
    await input.fill("run: echo to-stdout; echo to-stderr >&2; echo kept > notes.txt; exit 3");
    await input.press("Enter");
    const block = page.getByTestId("tool-call").first();
    await block.getByText("exit code 3").waitFor();
    await block.locator("summary").click();
    assert.equal((await block.getByTestId("stdout").innerText()).trim(), "to-stdout");
    assert.equal((await block.getByTestId("stderr").innerText()).trim(), "to-stderr");
    await page.getByText("The command exited with code 3.").waitFor();
    await shot("04-chat");

    // A run of six ticks; the page is reloaded after the second.
    const ticks = "run: for i in 1 2 3 4 5 6; do echo tick-$i; sleep 0.7; done";
    // The composer takes a message during a run too (it would interrupt): wait for the run's end.
    await idle();
    await input.fill(ticks);
    await input.press("Enter");
    const running = page.getByTestId("tool-call").nth(1);
    await running.locator("summary").click();
    await running.getByText("tick-2").waitFor({ timeout: 60_000 });
    rejoins.length = 0;
    await page.reload();
    const after = page.getByTestId("tool-call").nth(1);
    await after.waitFor();
    await after.locator("summary").click();
    // While it still runs, what was streamed before and after the reload, each line once.
    await after.getByText("tick-4").waitFor({ timeout: 60_000 });
    const midway = (await after.getByTestId("stdout").innerText()).trim().split("\n");
    assert.deepEqual(midway, [...new Set(midway)], `no line twice: ${midway.join(" ")}`);
    assert.deepEqual(midway.slice(0, 4), ["tick-1", "tick-2", "tick-3", "tick-4"]);
    await after.getByText("exit code 0").waitFor({ timeout: 60_000 });
    await page.getByText(/The command exited with code 0\./).waitFor();
    assert.equal(
      (await after.getByTestId("stdout").innerText()).trim(),
      "tick-1\ntick-2\ntick-3\ntick-4\ntick-5\ntick-6",
    );
    assert.equal(await page.getByText(/The command exited with code 0\./).count(), 1, "the reply once");
    assert.equal(await page.getByTestId("tool-call").count(), 2, "each tool call once");
    assert.equal(await page.getByText(/done · \d+ tokens in/).count(), 3, "each run's end once");
    assert.equal(rejoins.length, 1, rejoins.join("\n"));
    assert.match(rejoins[0]!, /last-event-id=[1-9]\d*$/, "rejoined after the last event of the log");
    await shot("05-chat-after-reload");
  });

  step("interrupt: a new message stops a running command and is answered next", async () => {
    const before = new URL(page.url()).hash;
    await page.getByRole("button", { name: "New session" }).click();
    for (const end = Date.now() + 20_000; new URL(page.url()).hash === before; ) {
      assert.ok(Date.now() < end, "no new session opened");
      await new Promise((r) => setTimeout(r, 100));
    }
    const input = page.getByLabel("Message");
    await input.fill("run: echo long-start; sleep 30; echo never-printed");
    await input.press("Enter");
    const block = page.getByTestId("tool-call").first();
    await block.locator("summary").click();
    // Its output, not the command's text in the summary: the command is under way.
    await block.getByTestId("stdout").getByText("long-start").waitFor({ timeout: 60_000 });
    // While it runs the composer takes a message that interrupts it.
    const started = performance.now();
    await input.fill("after the interrupt");
    await page.getByRole("button", { name: "Interrupt", exact: true }).click();
    await page.getByText("Error: the run was interrupted by a new message").waitFor();
    await page.getByTestId("reply").getByText("echo: after the interrupt").waitFor();
    await page.getByRole("button", { name: "Send", exact: true }).waitFor();
    const ms = performance.now() - started;
    assert.ok(ms < 20_000, `answered ${ms.toFixed(0)} ms after the interrupt: not after the 30 s sleep`);
    assert.match(await block.locator("summary").innerText(), /failed/);
    // The output stops where the command was stopped (the command's text names what it never printed).
    assert.equal((await block.getByTestId("stdout").innerText()).trim(), "long-start");
    assert.equal(await page.getByText("(interrupting the run)").count(), 1);
    assert.equal(
      await page.locator(".chat-user").filter({ hasText: "after the interrupt" }).count(),
      1,
      "the message once",
    );
    assert.equal(await page.getByText(/done · \d+ tokens in/).count(), 1, "only the interrupting run ended with done");
    await shot("05b-interrupt");
    console.log(`interrupt: the reply on screen ${ms.toFixed(0)} ms after the click`);
  });

  step("approve and deny pending tool calls (tool permission `ask`)", async () => {
    const hash = new URL(page.url()).hash;
    const [, , agentId] = hash.split("/");
    await page.goto(`${origin}/#/agents/${agentId}`);
    await page.getByLabel("bash").selectOption("ask");
    await page.getByRole("button", { name: "Save agent" }).click();
    await page.getByRole("status").getByText("Saved.").waitFor();
    await page.getByRole("button", { name: /New chat with/ }).click();
    const input = page.getByLabel("Message");
    await input.waitFor();
    await input.fill("run: echo approved-run");
    await input.press("Enter");
    await page.getByTestId("requires-action").getByText("Waiting for your decision").waitFor();
    await shot("06-approval");
    await page.getByRole("button", { name: "Approve" }).click();
    await page.getByText(/The command exited with code 0\.\nOutput:\napproved-run/).waitFor();
    // The composer takes a message during a run too (it would interrupt): wait for the run's end.
    await idle();
    await input.fill("run: echo never-runs");
    await input.press("Enter");
    await page.getByRole("button", { name: "Deny" }).waitFor();
    await page.getByRole("button", { name: "Deny" }).click();
    await page.getByText(/The tool failed/).waitFor();
    assert.doesNotMatch(await text("[data-testid=stdout]"), /never-runs/);
  });

  step(
    "sessions of an agent: the event log replayed, the sandbox, workspace files (list, view, download, upload)",
    async () => {
      const [, , agentId] = new URL(page.url()).hash.split("/");
      await page.goto(`${origin}/#/agents/${agentId}`);
      const list = page.getByTestId("agent-sessions");
      await list
        .getByRole("link", { name: /^Session/ })
        .first()
        .waitFor();
      assert.equal(await list.getByRole("link", { name: /^Session/ }).count(), 3);
      // The first chat: the one with the ticks.
      const sessions = (await api("GET", stack.endpoints.agents, `/v1/agents/${agentId}/sessions`)).items as Array<{
        id: string;
        created_at?: string;
        createdAt?: string;
      }>;
      const first = sessions.sort((a, b) =>
        String(a.created_at ?? a.createdAt).localeCompare(String(b.created_at ?? b.createdAt)),
      )[0]!;
      await page.goto(`${origin}/#/sessions/${first.id}`);
      const status = page.getByTestId("session-status");
      await status.waitFor();
      assert.match(await status.innerText(), /Run\s+idle/);
      assert.match(await status.innerText(), /Sandbox\s+[0-9a-f-]{36}/);
      assert.match(await status.innerText(), /Tool calls\s+2/);
      // agents' usage records of the session (GET /v1/sessions/{id}/usage).
      await status.getByText("Sandbox wall time").waitFor();
      assert.match(
        await status.innerText(),
        /Sandbox CPU\s+\d+ ms\s+Sandbox wall time\s+[1-9]\d* ms\s+Model calls\s+[1-9]/,
      );
      assert.match(
        await text(".chat"),
        /hello from the console[\s\S]*echo: hello from the console[\s\S]*exit code 3[\s\S]*exit code 0/,
      );
      const files = page.getByTestId("files");
      await files.getByText("notes.txt", { exact: true }).waitFor();
      await page.getByRole("button", { name: "View notes.txt" }).click();
      assert.equal((await page.getByTestId("file-text").innerText()).trim(), "kept");
      const [download] = await Promise.all([
        page.waitForEvent("download"),
        page.getByRole("button", { name: "Download notes.txt" }).click(),
      ]);
      assert.equal(download.suggestedFilename(), "notes.txt");
      assert.equal(readFileSync((await download.path())!, "utf8"), "kept\n");
      await page.getByLabel("Upload a file here").setInputFiles({
        name: "uploaded.txt",
        mimeType: "text/plain",
        buffer: Buffer.from("from the browser\n"),
      });
      await page.getByRole("button", { name: "Upload", exact: true }).click();
      await files.getByText("uploaded.txt", { exact: true }).waitFor();
      await shot("07-session");
      // In the workspace as the tool calls see it.
      const read = await api("GET", stack.endpoints.agents, `/v1/sessions/${first.id}/files:read?path=uploaded.txt`);
      assert.equal(Buffer.from(String(read.data), "base64").toString(), "from the browser\n");
    },
  );

  step("API keys: the raw key shown once with a copy button, listed, revoked", async () => {
    await page.goto(`${origin}/#/keys`);
    await page.getByRole("heading", { name: "API keys" }).waitFor();
    await page.getByLabel("Name").fill("console-key");
    await page.getByRole("button", { name: "Create key" }).click();
    const raw = (await page.getByTestId("raw-key").innerText()).trim();
    assert.ok(raw.length >= 20, raw);
    await page.getByRole("button", { name: "Copy key" }).click();
    await page.getByRole("button", { name: "Copied" }).waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as Browserish).navigator.clipboard.readText()), raw);
    await page.getByTestId("keys").getByText("console-key", { exact: true }).waitFor();
    await shot("08-api-keys");
    const works = await fetch(`${origin}/v1/agents`, { headers: { authorization: `Bearer ${raw}` } });
    assert.equal(works.status, 200);
    await page.getByRole("button", { name: "Done" }).click();
    assert.equal(await page.getByTestId("raw-key").count(), 0, "not shown again");
    await page.getByRole("button", { name: "Revoke console-key" }).click();
    await page.getByText("No keys.").waitFor();
    const revoked = await fetch(`${origin}/v1/agents`, { headers: { authorization: `Bearer ${raw}` } });
    assert.equal(revoked.status, 401);
  });

  step("usage: tokens and sandbox time per agent and per day, as charts, matching agents' usage API", async () => {
    await page.goto(`${origin}/#/usage`);
    await page.getByRole("heading", { name: "Usage" }).waitFor();
    const agents = (await api("GET", stack.endpoints.agents, "/v1/agents?limit=100")).items as Array<{
      id: string;
      name: string;
    }>;
    const helper = agents.find((a) => a.name === "Console helper")!;
    const today = new Date().toISOString().slice(0, 10);
    const tomorrow = new Date(Date.parse(today) + 86_400_000).toISOString();
    const got = await api(
      "GET",
      stack.endpoints.agents,
      `/v1/usage?agentId=${helper.id}&since=${today}T00:00:00Z&until=${encodeURIComponent(tomorrow)}`,
    );
    const u = (got.usage ?? {}) as Record<string, string | number | undefined>;
    const tokens = Number(u.inputTokens ?? u.input_tokens ?? 0) + Number(u.outputTokens ?? u.output_tokens ?? 0);
    const wallMs = Number(u.sandboxWallMs ?? u.sandbox_wall_ms ?? 0);
    assert.ok(tokens > 0 && wallMs > 0, JSON.stringify(got));
    // The table: the agent's row for today holds the API's numbers.
    const row = page.getByTestId(`usage-Console helper-${today}`);
    await row.waitFor();
    assert.match(await row.innerText(), new RegExp(`Console helper\\s+${today}\\s+${tokens}\\s`));
    // The charts: today's bar has the agent's segment with that value; the other days none.
    const tokenBar = page
      .getByTestId("chart-tokens")
      .locator(`g[data-day="${today}"] rect[data-agent="Console helper"]`);
    assert.equal(await tokenBar.getAttribute("data-value"), String(tokens));
    // The axis's top is a round number at most 2.5 times the tallest bar: at least 0.4 of the 200-unit plot.
    assert.ok(Number(await tokenBar.getAttribute("height")) >= 80, "the only bar is drawn to scale");
    const timeBar = page
      .getByTestId("chart-sandboxMs")
      .locator(`g[data-day="${today}"] rect[data-agent="Console helper"]`);
    assert.equal(await timeBar.getAttribute("data-value"), String(wallMs));
    assert.equal(
      await page.getByTestId("chart-tokens").locator("rect").count(),
      1,
      "agents without usage draw nothing",
    );
    assert.match((await page.locator(".legend").innerText()).trim(), /^Console helper$/);
    assert.match((await page.getByTestId("chart-tokens").getAttribute("aria-label")) ?? "", new RegExp(today));
    await shot("09-usage");
  });

  step(
    "members: invite by email with a role, revoke, accept the link as a new person (who is offered nothing an owner does), change a role, remove",
    async () => {
      await page.goto(`${origin}/#/team`);
      const members = page.getByTestId("members");
      await members.getByRole("cell", { name: `${OWNER.email} (you)` }).waitFor();
      // The only owner: neither demoted nor removed (identity: 409 last_owner), so not offered.
      assert.equal(await page.getByLabel(`Role of ${OWNER.email}`).isDisabled(), true);
      assert.equal(await page.getByRole("button", { name: `Remove ${OWNER.email}` }).isDisabled(), true);
      const invite = async (email: string, role: string) => {
        await page.getByLabel("Email to invite").fill(email);
        await page.getByLabel("Role of the invited person").selectOption(role);
        await page.getByRole("button", { name: "Invite", exact: true }).click();
        await page.getByTestId("invitations").getByRole("cell", { name: email, exact: true }).waitFor();
        return (await page.getByTestId("invite-link").innerText()).trim();
      };
      const link = await invite("new-person@example.com", "member");
      assert.match(link, new RegExp(`^${origin}/#/accept/inv_`));
      await invite("revoke-me@example.com", "owner");
      await page.getByRole("button", { name: "Revoke invitation for revoke-me@example.com" }).click();
      await page
        .getByTestId("invitations")
        .getByRole("cell", { name: "revoke-me@example.com", exact: true })
        .waitFor({ state: "detached" });
      const myOrgs = (await api("GET", stack.endpoints.identity, "/v1/users/me/orgs")) as unknown as Array<{
        org: { id: string; name: string };
      }>;
      const orgId = myOrgs.find((o) => o.org.name === "CLI Org")!.org.id;
      const open = async () =>
        (await fetch(`${stack.endpoints.identity}/v1/orgs/${orgId}/invitations`, {
          headers: { authorization: `Bearer ${token}` },
        }).then((r) => r.json())) as Array<{ email: string; role: string }>;
      assert.deepEqual(
        (await open()).map((i) => `${i.email} ${i.role}`),
        ["new-person@example.com member"],
      );
      await shot("10-members");

      // The invited person, in a browser of their own: the link, a name and a password.
      const theirs = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      try {
        const p2 = await theirs.newPage();
        p2.setDefaultTimeout(20_000);
        p2.on("pageerror", (e) => pageErrors.push(String(e)));
        await p2.goto(link);
        await p2.getByRole("heading", { name: "Join an organization" }).waitFor();
        assert.doesNotMatch(p2.url(), /inv_/, "the token is taken out of the address bar");
        // (Not getByLabel("Email"): the name field's hint mentions "the email's first part".)
        await p2.getByRole("textbox", { name: /^Email/ }).fill("new-person@example.com");
        await p2.getByLabel("Your name").fill("New Person");
        await p2.getByLabel("Password").fill("new-person-pass-1");
        await p2.getByRole("button", { name: "Accept the invitation" }).click();
        await p2.getByTestId("whoami").getByText("new-person@example.com").waitFor();
        assert.match(await p2.getByLabel("Organization").locator("option:checked").innerText(), /CLI Org \(member\)/);
        // A member is offered none of the owners' actions.
        await p2.goto(`${origin}/#/team`);
        await p2.getByTestId("member-notice").waitFor();
        assert.match(await p2.getByTestId("member-notice").innerText(), /You are a member/);
        assert.equal(await p2.getByRole("button", { name: /^(Invite|Remove|Revoke)/ }).count(), 0);
        assert.equal(await p2.getByTestId("members").count(), 0);
        await p2.screenshot({ path: join(ARTIFACTS, "11-member-view.png"), fullPage: true });
      } finally {
        await theirs.close();
      }
      assert.deepEqual(await open(), [], "the invitation is used");

      // The owner sees them, makes them an owner, then removes them.
      await page.reload();
      const role = page.getByLabel("Role of new-person@example.com");
      await role.waitFor();
      assert.equal(await role.inputValue(), "member");
      await role.selectOption("owner");
      const listed = async () =>
        (await fetch(`${stack.endpoints.identity}/v1/orgs/${orgId}/members`, {
          headers: { authorization: `Bearer ${token}` },
        }).then((r) => r.json())) as Array<{ email: string; role: string }>;
      await page
        .getByRole("button", { name: `Remove ${OWNER.email}` })
        .and(page.locator(":enabled"))
        .waitFor();
      assert.equal((await listed()).find((m) => m.email === "new-person@example.com")?.role, "owner");
      // Two owners now: the signed-in one may change their own role.
      assert.equal(await page.getByLabel(`Role of ${OWNER.email}`).isDisabled(), false);
      await page.getByRole("button", { name: "Remove new-person@example.com" }).click();
      await page.getByTestId("member-new-person@example.com").waitFor({ state: "detached" });
      assert.deepEqual(
        (await listed()).map((m) => m.email),
        [OWNER.email],
      );
      const audit = page.getByTestId("audit");
      await audit.getByText("member.removed").waitFor();
      for (const action of ["member.invited", "invitation.revoked", "invitation.accepted", "member.role_changed"])
        assert.match(await audit.innerText(), new RegExp(action.replace(".", "\\.")));
      await shot("12-members-audit");
    },
  );

  step("at 390 px wide: nothing wider than the screen; the chat still works", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [path, name] of [
      ["agents", "13-agents-390"],
      ["chat", "14-chat-390"],
      ["usage", "15-usage-390"],
    ] as const) {
      await page.goto(`${origin}/#/${path}`);
      const heading = { agents: "Agents", chat: "Chat", usage: "Usage" }[path];
      await page.getByRole("heading", { name: heading }).waitFor();
      await page.waitForLoadState("networkidle");
      const width = await page.evaluate(
        () => (globalThis as unknown as Browserish).document.documentElement.scrollWidth,
      );
      assert.ok(width <= 390, `${path}: ${width} px wide`);
      await shot(name);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  step("sign out: back to the sign-in screen, the tokens gone from the tab", async () => {
    await page.goto(`${origin}/#/agents`);
    // The app reloads itself on sign-out.
    const reloaded = page.waitForEvent("load");
    await page.getByRole("button", { name: "Sign out" }).click();
    await reloaded;
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as Browserish).sessionStorage.length), 0);
    // Opened again, it is still signed out.
    await page.goto(`${origin}/#/agents`);
    await page.getByRole("heading", { name: "Sign in" }).waitFor();
    assert.deepEqual(pageErrors, [], failureContext());
  });
});
