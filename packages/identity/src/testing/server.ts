import { randomBytes } from "node:crypto";
import { makeTestPki } from "@platform/pki/testing";
import { createServiceTransport, loadServiceTls, type ServiceTls } from "@platform/rpc";
import { Writable } from "node:stream";
import { createPooledTestDatabase } from "./database.ts";
import { type App, startApp } from "../app.ts";
import { loadSettings } from "../config/settings.ts";

/** Every log line the service wrote, as text (for "no secret in any log line"). */
export class LogCapture extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: string, done: () => void) {
    this.lines.push(...chunk.toString().split("\n").filter(Boolean));
    done();
  }
  get text(): string {
    return this.lines.join("\n");
  }
}

export type TestServer = Awaited<ReturnType<typeof startTestServer>>;

/**
 * The real identity app (migrations, key, bootstrap, both listeners on
 * ephemeral ports, the internal one with mutual TLS from a throw-away PKI)
 * on a fresh test database, with its logs captured.
 */
export async function startTestServer(env: Record<string, string> = {}) {
  const pki = await makeTestPki(["identity", "agents", "runtime-router", "runtime-worker", "compute", "operator"]);
  const tls = (name: string): ServiceTls => loadServiceTls(pki.env(name), name);
  // INTERNAL_TLS=off: for tests that are not about internal traffic (e.g. hostile input on every surface).
  const internalTls = env.INTERNAL_TLS === "off" ? undefined : tls("identity");
  const database = await createPooledTestDatabase();
  const logs = new LogCapture();
  const settings = loadSettings({
    IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
    IDENTITY_EMBEDDED_MEMORY: "1",
    HOST: "127.0.0.1",
    SERVER_PORT: "0",
    IDENTITY_GRPC_PORT: "0",
    LOG_LEVEL: "debug",
    ARGON2_MEMORY_KIB: "1024",
    ARGON2_TIME_COST: "1",
    BOOTSTRAP_OWNER_EMAIL: "Owner@Example.com",
    BOOTSTRAP_OWNER_PASSWORD: "owner-password-1",
    BOOTSTRAP_ORG_NAME: "Acme Inc",
    ...env,
  });
  let app: App;
  try {
    app = await startApp(settings, { logDestination: logs, database, internalTls });
  } catch (err) {
    await database.close();
    pki.remove();
    throw err;
  }

  async function call(
    method: string,
    path: string,
    init: { body?: unknown; raw?: string; token?: string; idem?: string; headers?: Record<string, string> } = {},
  ) {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (init.body !== undefined || init.raw !== undefined) headers["content-type"] ??= "application/json";
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    if (init.idem) headers["idempotency-key"] = init.idem;
    const res = await fetch(app.urls.rest + path, {
      method,
      headers,
      body: init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    // biome-ignore lint/suspicious/noExplicitAny: test convenience
    return { status: res.status, headers: res.headers, text, json: json as any };
  }

  async function login(email = "owner@example.com", password = "owner-password-1") {
    const r = await call("POST", "/v1/auth/login", { body: { email, password } });
    if (r.status !== 200) throw new Error(`login failed: ${r.status} ${r.text}`);
    return r.json as { access_token: string; refresh_token: string; token_type: string; expires_in: number };
  }

  /**
   * Stops the app (listeners, webhook worker, key schedule) and starts it
   * again with the same settings on the same database, as a restarted process
   * would be (new ports). `app`, `identity`, `base` and `grpcUrl` follow.
   */
  async function restart(): Promise<App> {
    await app.identity.webhookWorker.stop();
    await app.rotation.stop();
    await app.servers.close();
    app = await startApp(settings, { logDestination: logs, database, internalTls });
    return app;
  }

  return {
    get app() {
      return app;
    },
    database,
    get identity() {
      return app.identity;
    },
    logs,
    get base() {
      return app.urls.rest;
    },
    get grpcUrl() {
      return app.urls.grpc;
    },
    restart,
    /** The throw-away PKI: `tls(name)` is a service's certificate, `pki.env(name)` its TLS_* settings. */
    pki,
    tls,
    /** A gRPC transport to the internal port with `caller`'s certificate. */
    grpcTransport: (caller = "agents") =>
      createServiceTransport({ baseUrl: app.urls.grpc, tls: internalTls && tls(caller) }),
    call,
    login,
    close: async () => {
      await app.identity.webhookWorker.stop();
      await app.rotation.stop();
      await app.servers.close();
      // A test may already have closed the database (readiness checks).
      await database.close().catch(() => {});
      pki.remove();
    },
  };
}
