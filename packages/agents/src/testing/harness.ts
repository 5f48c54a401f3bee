import assert from "node:assert/strict";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { AgentService, SessionService } from "@platform/gen/agents/v1/agents_pb";
import { IdentityDouble } from "@platform/identity-client/testing";
import { errorInterceptor } from "@platform/rpc";
import pino, { type Logger } from "pino";
import { ComputeSandboxes } from "../adapters/compute.ts";
import { grpcTransport } from "../adapters/grpc-transport.ts";
import { IdentityAuthenticator } from "../adapters/identity.ts";
import { type AgentsAppOptions, createAgentsApp } from "../app.ts";
import type { AgentsConfig } from "../config.ts";
import { type AgentsServer, createAgentsServer } from "../process.ts";
import { DevModel } from "../providers/dev.ts";
import { ProviderRegistry } from "../providers/registry.ts";
import { ComputeDouble } from "./compute-double.ts";
import { createAgentsTestDatabase } from "./database.ts";
import { testAgentsConfig } from "./config.ts";
import { ScriptedModel } from "./scripted-model.ts";

export type Harness = Awaited<ReturnType<typeof startHarness>>;

/**
 * The agents app over a fresh test database, with identity and compute
 * doubles served over real gRPC, mounted on an in-process Connect router.
 * Models: `dev/...` and `scripted/...` (the returned ScriptedModel).
 */
export async function startHarness(
  options: Partial<Omit<AgentsAppOptions, "database" | "authenticator" | "sandboxes" | "logger">> = {},
) {
  const database = await createAgentsTestDatabase();
  const identity = new IdentityDouble();
  const compute = new ComputeDouble();
  const identityUrl = await identity.start();
  const computeUrl = await compute.start();
  const scripted = new ScriptedModel();
  const providers =
    options.providers ?? new ProviderRegistry().register("dev", new DevModel()).register("scripted", scripted);
  const logger = pino({ level: process.env.LOG_LEVEL ?? "silent" });
  /** One instance of the app over the shared database and doubles, with in-process clients. */
  const instance = async () => {
    const app = await createAgentsApp({
      pollMs: 200,
      ...options,
      providers,
      database,
      logger,
      authenticator: new IdentityAuthenticator(grpcTransport(identityUrl)),
      sandboxes: new ComputeSandboxes(grpcTransport(computeUrl)),
    });
    const transport = createRouterTransport(
      (router) => {
        for (const s of app.services) router.service(s.service as never, s.impl as never);
      },
      { router: { interceptors: [errorInterceptor(logger), ...app.interceptors] } },
    );
    return { app, agents: createClient(AgentService, transport), sessions: createClient(SessionService, transport) };
  };
  const { app, agents, sessions } = await instance();
  /** A second instance of the app over the same database and doubles (a replica; cheap, no new database). */
  const replica = instance;
  return {
    replica,
    app,
    database,
    identity,
    compute,
    scripted,
    agents,
    sessions,
    identityUrl,
    computeUrl,
    /** Call options carrying a caller's bearer token. */
    as: (caller: { token: string }) => ({ headers: { authorization: `Bearer ${caller.token}` } }),
    async close() {
      await app.stop();
      await identity.stop();
      await compute.stop();
      await database.close();
    },
  };
}

/** Collects a server stream. */
export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of stream) out.push(item);
  return out;
}

export type ServerHarness = Awaited<ReturnType<typeof startServerHarness>>;

/**
 * The agents server as a process runs it (REST + SSE on its public port, gRPC on
 * its internal one, both on loopback) over a fresh test database, with identity
 * and compute doubles served over real gRPC: the setup the server suites share.
 * `stop()` and `start()` restart it on the same database (`service`, `base` and
 * `grpcBase` follow); `replica()` starts a second one beside it.
 */
export async function startServerHarness(options: {
  providers: ProviderRegistry;
  /** What the suite needs other than testAgentsConfig's defaults. */
  config?: Partial<AgentsConfig>;
  /** Default: silent, or LOG_LEVEL. */
  logger?: Logger;
  /** Runs on the compute double before the server starts (its images, say). */
  prepare?: (doubles: { identity: IdentityDouble; compute: ComputeDouble }) => void;
}) {
  const database = await createAgentsTestDatabase();
  const identity = new IdentityDouble();
  const compute = new ComputeDouble();
  options.prepare?.({ identity, compute });
  const config = testAgentsConfig(
    { identityGrpcUrl: await identity.start(), computeGrpcUrl: await compute.start() },
    options.config,
  );
  const logger = options.logger ?? pino({ level: process.env.LOG_LEVEL ?? "silent" });
  const listening = async () => {
    const server = await createAgentsServer(config, logger, {
      providers: options.providers,
      database,
      pollMs: 200,
      internalTls: undefined,
    });
    const { url, grpcUrl } = await server.listen();
    return { server, url, grpcUrl };
  };
  let current = await listening();
  let stopped = false;
  return {
    database,
    identity,
    compute,
    config,
    get service(): AgentsServer {
      return current.server;
    },
    /** The public (REST + SSE) base URL (after stop(), the stopped server's). */
    get base(): string {
      return current.url;
    },
    /** The internal (gRPC) base URL (after stop(), the stopped server's). */
    get grpcBase(): string {
      return current.grpcUrl;
    },
    /** Closes the server; the database and doubles stay. */
    async stop() {
      stopped = true;
      await current.server.close();
    },
    /** A new server on the same database and doubles (new ports). */
    async start() {
      current = await listening();
      stopped = false;
    },
    async restart() {
      await this.stop();
      await this.start();
    },
    /** A second server over the same database and doubles, listening; the caller closes it. */
    replica: listening,
    async close() {
      if (!stopped) await current.server.close();
      await identity.stop();
      await compute.stop();
      await database.close();
    },
  };
}

// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
type Json = Record<string, any>;

export type RestCallOptions = { token: string; body?: unknown; lastEventId?: string };

/** One REST call to `base` as a bearer-token caller: status, body text and, when JSON, the parsed body. */
export async function restCall(base: string, method: string, path: string, opts: RestCallOptions) {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.token}` };
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  if (opts.lastEventId) headers["last-event-id"] = opts.lastEventId;
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    json: (text && res.headers.get("content-type")?.includes("json") ? JSON.parse(text) : undefined) as Json,
  };
}

export type SseFrame = { id: number; data: Json };

/** The frames of a Server-Sent Events body that carry data: their id (0 when none) and parsed JSON. */
export function parseSse(text: string): SseFrame[] {
  return text
    .split("\n\n")
    .filter((block) => block.split("\n").some((l) => l.startsWith("data:")))
    .map((block) => {
      const lines = block.split("\n");
      const id = Number(lines.find((l) => l.startsWith("id:"))?.slice(3) ?? "0");
      const data = lines
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trim())
        .join("\n");
      return { id, data: JSON.parse(data) };
    });
}

/** A new caller of the identity double (an org owner), an agent made with `agent` over REST (201 asserted) and a session of it. */
export async function agentAndSession(h: Pick<ServerHarness, "base" | "identity">, agent: Json) {
  const caller = h.identity.caller();
  const created = await restCall(h.base, "POST", "/v1/agents", { token: caller.token, body: agent });
  assert.equal(created.status, 201, created.text);
  const session = await restCall(h.base, "POST", "/v1/sessions", {
    token: caller.token,
    body: { agentId: created.json.id },
  });
  return { caller, agent: created.json, session: session.json };
}

/** One user message sent over REST, its SSE reply read to the end (200 asserted). */
export async function sendMessage(
  base: string,
  token: string,
  sessionId: string,
  content: string,
): Promise<SseFrame[]> {
  const res = await restCall(base, "POST", `/v1/sessions/${sessionId}/messages`, {
    token,
    body: { messages: [{ role: "user", content }] },
  });
  assert.equal(res.status, 200, res.text);
  return parseSse(res.text);
}

/** The events after `after`, to the end of the run that follows (Last-Event-ID rejoin; 200 asserted). */
export async function rejoinEvents(base: string, token: string, sessionId: string, after: number): Promise<SseFrame[]> {
  const res = await restCall(base, "GET", `/v1/sessions/${sessionId}/events`, { token, lastEventId: String(after) });
  assert.equal(res.status, 200, res.text);
  return parseSse(res.text);
}

/** A REST call with these headers whose answer is JSON: its status and parsed body. */
export async function jsonCall(
  base: string,
  headers: Record<string, string>,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Json };
}

/** jsonCall that must succeed (200 or 201 asserted): the parsed body. */
export async function jsonOk(
  base: string,
  headers: Record<string, string>,
  method: string,
  path: string,
  body?: unknown,
): Promise<Json> {
  const r = await jsonCall(base, headers, method, path, body);
  assert.ok(r.status === 200 || r.status === 201, `${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}
