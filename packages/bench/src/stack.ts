import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase } from "@platform/db/testing";
import { IdentityClient } from "@platform/identity-client";
import { type EnsureResult, ensurePki, tlsEnv } from "@platform/pki";
import { createServiceTransport, loadServiceTls, type ServiceTls } from "@platform/rpc";
// The runtime package exports only its orchestrator types from its index;
// the router, the local orchestrator and the identity authenticator are
// reached by path until it exports them.
import { LocalOrchestrator } from "../../runtime/src/orchestrator/local/local-orchestrator.ts";
import { type RunningRouter, startRouter } from "../../runtime/src/router/router.ts";
import { ServiceProcess } from "./host/service-process.ts";
import { startTokenEdge } from "./peers/bare-token-chain.ts";

export const OWNER = { email: "bench-owner@example.com", password: "bench-owner-password-1" };
const PG_DEFAULT = "postgres://postgres@127.0.0.1:5432/postgres";

export interface Tokens {
  access_token: string;
  refresh_token: string;
}

/**
 * The services under test, started on first use and shared by the figures:
 * identity, compute and agents each in its own process (the real factories
 * on ephemeral ports), the runtime router in this process with the local
 * orchestrator (real tenant worker processes). Databases: a fresh one per
 * service on the PostgreSQL server when reachable, else PGlite. Internal
 * traffic is mutual TLS, as the launcher runs it, on a PKI made in the
 * bench's temporary directory.
 */
export class Stack {
  readonly tmp = mkdtempSync(join(tmpdir(), "platform-bench-"));
  constructor() {
    // Sandboxes run as their own uids and must traverse the path to their workspace.
    chmodSync(this.tmp, 0o711);
  }
  readonly #closers: Array<() => Promise<unknown>> = [];
  #identity?: Promise<ServiceProcess>;
  #compute?: Promise<ServiceProcess>;
  #agents?: Promise<ServiceProcess>;
  #router?: Promise<{ router: RunningRouter; orchestrator: LocalOrchestrator }>;
  #pg: boolean | undefined;
  #pki?: Promise<EnsureResult>;
  #identityEnv?: Record<string, string>;
  readonly #grpcJsPeers: { identity?: Promise<ServiceProcess>; compute?: Promise<ServiceProcess> } = {};
  databaseKind = "pglite";
  /** Each service's PostgreSQL database (absent on PGlite): the curves seed rows into it directly. */
  readonly databaseUrls: { identity?: string; agents?: string } = {};

  #certificates(): Promise<EnsureResult> {
    this.#pki ??= ensurePki(join(this.tmp, "tls"));
    return this.#pki;
  }

  /** TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE of service `name`. */
  async #tlsEnv(name: string): Promise<Record<string, string>> {
    return tlsEnv((await this.#certificates()).files(name));
  }

  /** Service `name`'s certificate: a figure calls an internal port as the service it stands in for. */
  async tls(name: string): Promise<ServiceTls> {
    return loadServiceTls(await this.#tlsEnv(name), name);
  }

  async #databaseUrl(): Promise<string | undefined> {
    if (process.env.BENCH_DB === "pglite") return undefined;
    process.env.TEST_DATABASE_URL ??= process.env.DATABASE_URL ?? PG_DEFAULT;
    if (this.#pg === false) return undefined;
    try {
      const db = await createTestDatabase<unknown>();
      this.#pg = true;
      this.databaseKind = "postgresql";
      // Dropped after the services are stopped (closers run in reverse).
      this.#closers.push(() => db.close());
      return db.url;
    } catch {
      this.#pg = false;
      return undefined;
    }
  }

  identity(): Promise<ServiceProcess> {
    this.#identity ??= (async () => {
      const url = await this.#databaseUrl();
      this.databaseUrls.identity = url;
      this.#identityEnv = {
        IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
        ...(url ? { DATABASE_URL: url } : { IDENTITY_EMBEDDED_MEMORY: "1" }),
        ...(await this.#tlsEnv("identity")),
        HOST: "127.0.0.1",
        SERVER_PORT: "0",
        IDENTITY_GRPC_PORT: "0",
        BOOTSTRAP_OWNER_EMAIL: OWNER.email,
        BOOTSTRAP_OWNER_PASSWORD: OWNER.password,
        BOOTSTRAP_ORG_NAME: "Bench Org",
        // The login figures are one account logging in from many connections at once, which the
        // brute-force throttle (rightly) treats as guessing; they measure hashing, not the throttle.
        LOGIN_THROTTLE_ACCOUNT_FAILURES: "1000000",
        LOGIN_THROTTLE_ADDRESS_FAILURES: "1000000",
        ARGON2_MAX_QUEUE: "100000",
      };
      const svc = await ServiceProcess.start("identity", this.#identityEnv);
      this.#closers.push(() => svc.stop());
      return svc;
    })();
    return this.#identity;
  }

  compute(): Promise<ServiceProcess> {
    this.#compute ??= (async () => {
      const url = await this.#databaseUrl();
      const svc = await ServiceProcess.start("compute", {
        ...(url ? { DATABASE_URL: url } : {}),
        ...(await this.#tlsEnv("compute")),
        HOST: "127.0.0.1",
        COMPUTE_PORT: "0",
        COMPUTE_DATA_DIR: join(this.tmp, "compute"),
        // The pause-resume figure measures both kinds of paused sandbox: frozen (the first second) and released.
        COMPUTE_PAUSE_RELEASE_SECONDS: "1",
      });
      this.#closers.push(() => svc.stop());
      return svc;
    })();
    return this.#compute;
  }

  agents(): Promise<ServiceProcess> {
    this.#agents ??= (async () => {
      const identity = await this.identity();
      const compute = await this.compute();
      const url = await this.#databaseUrl();
      this.databaseUrls.agents = url;
      const svc = await ServiceProcess.start("agents", {
        ...(url ? { DATABASE_URL: url } : { AGENTS_DATA_DIR: join(this.tmp, "agents") }),
        ...(await this.#tlsEnv("agents")),
        HOST: "127.0.0.1",
        AGENTS_PORT: "0",
        AGENTS_GRPC_PORT: "0",
        IDENTITY_GRPC_URL: identity.urls.grpc!,
        // Tool calls (the mixed-load figure) run in the real compute service.
        COMPUTE_GRPC_URL: compute.urls.grpc!,
      });
      this.#closers.push(() => svc.stop());
      return svc;
    })();
    return this.#agents;
  }

  /**
   * identity or compute serving its own implementations under grpc-js (the
   * peer of our server, src/peers/grpc-js-server.ts), in a process of its
   * own with the same mutual TLS: identity's with the same settings and
   * database as the one under test (on PGlite a memory database of its own,
   * bootstrapped alike); compute's with a database and data directory of
   * its own (an exec on a ready sandbox reads neither). Started on first use.
   */
  grpcJsPeer(kind: "identity" | "compute"): Promise<ServiceProcess> {
    this.#grpcJsPeers[kind] ??= (async () => {
      let env: Record<string, string>;
      if (kind === "identity") {
        await this.identity();
        env = this.#identityEnv!;
      } else {
        const url = await this.#databaseUrl();
        env = {
          ...(url ? { DATABASE_URL: url } : {}),
          ...(await this.#tlsEnv("compute")),
          HOST: "127.0.0.1",
          COMPUTE_PORT: "0",
          COMPUTE_DATA_DIR: join(this.tmp, "compute-grpc-js"),
        };
      }
      const svc = await ServiceProcess.start(kind, { ...env, BENCH_PEER: "grpc-js" });
      this.#closers.push(() => svc.stop());
      return svc;
    })();
    return this.#grpcJsPeers[kind];
  }

  /**
   * The bare node:http2 gRPC server (src/peers/bare-grpc.ts) with identity's
   * certificate, in a process of its own, stopped by `stop()` of the result.
   */
  async bareGrpc(): Promise<ServiceProcess> {
    return ServiceProcess.start("bare-grpc", { ...(await this.#tlsEnv("identity")), HOST: "127.0.0.1" });
  }

  /** The bare node:http2 server streaming a command's stdout (src/peers/bare-exec.ts) with compute's certificate. */
  async bareExec(): Promise<ServiceProcess> {
    return ServiceProcess.start("bare-exec", { ...(await this.#tlsEnv("compute")), HOST: "127.0.0.1" });
  }

  /**
   * The bare login server (src/peers/bare-login.ts) with the bench owner's
   * account, in a process of its own on a database of its own (the same
   * kind as identity's), stopped by `stop()` of the result.
   */
  async bareLogin(): Promise<ServiceProcess> {
    const url = await this.#databaseUrl();
    return ServiceProcess.start("bare-login", {
      ...(url ? { DATABASE_URL: url } : {}),
      HOST: "127.0.0.1",
      BENCH_LOGIN_EMAIL: OWNER.email,
      BENCH_LOGIN_PASSWORD: OWNER.password,
    });
  }

  /**
   * The per-token figure's hops floor (src/peers/bare-token-chain.ts): the
   * source with agents' certificate on agents' database, the relay with the
   * tenant worker's, each in a process of its own, the edge in this process
   * with the router's; `url` is the edge's. Stopped by `stop()`.
   */
  async tokenChainFloor(): Promise<{ url: string; stop(): Promise<void> }> {
    const url = this.databaseUrls.agents;
    const source = await ServiceProcess.start("bare-token-source", {
      ...(await this.#tlsEnv("agents")),
      ...(url ? { DATABASE_URL: url } : {}),
      HOST: "127.0.0.1",
    });
    const stops: Array<() => Promise<unknown>> = [() => source.stop()];
    try {
      const relay = await ServiceProcess.start("bare-token-relay", {
        ...(await this.#tlsEnv("runtime-worker")),
        HOST: "127.0.0.1",
        BENCH_UPSTREAM: source.urls.grpc!,
      });
      stops.unshift(() => relay.stop());
      const edge = await startTokenEdge("127.0.0.1", await this.tls("runtime-router"), relay.urls.grpc!);
      stops.unshift(() => edge.close());
      return {
        url: edge.url,
        stop: async () => {
          for (const stop of stops) await stop().catch(() => {});
        },
      };
    } catch (err) {
      for (const stop of stops) await stop().catch(() => {});
      throw err;
    }
  }

  router(): Promise<{ router: RunningRouter; orchestrator: LocalOrchestrator }> {
    this.#router ??= (async () => {
      const identity = await this.identity();
      const agents = await this.agents();
      const tls = await this.tls("runtime-router");
      const orchestrator = await LocalOrchestrator.open({
        dataDir: join(this.tmp, "runtime"),
        workerEnv: { AGENTS_GRPC_URL: agents.urls.grpc!, LOG_LEVEL: "warn" },
        workerStdio: "ignore",
        tls: { client: tls, workerFiles: (await this.#certificates()).files("runtime-worker") },
      });
      const router = await startRouter({
        auth: new IdentityClient(createServiceTransport({ baseUrl: identity.urls.grpc!, tls })),
        orchestrator,
        tls,
        host: "127.0.0.1",
        port: 0,
        sweeps: false,
      });
      this.#closers.push(() => router.close());
      return { router, orchestrator };
    })();
    return this.#router;
  }

  /** After a figure: the services it used stop sampling their event-loop delay (host/child.ts). */
  async figureDone(): Promise<void> {
    const started = [
      this.#identity,
      this.#compute,
      this.#agents,
      this.#grpcJsPeers.identity,
      this.#grpcJsPeers.compute,
    ];
    await Promise.all(started.map((s) => s?.then((svc) => svc.lagOff()).catch(() => {})));
  }

  /** Logs the bootstrap owner in over REST. */
  async login(): Promise<Tokens> {
    const identity = await this.identity();
    const res = await fetch(`${identity.urls.rest}/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(OWNER),
    });
    if (res.status !== 200) throw new Error(`login failed: ${res.status} ${await res.text()}`);
    return (await res.json()) as Tokens;
  }

  /** REST call on the agents service as the owner. */
  async agentsRest<T>(token: string, method: string, path: string, body?: unknown): Promise<T> {
    const agents = await this.agents();
    const res = await fetch(`${agents.urls.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`agents ${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  /** A new agent with the given model and a session of it; returns the session id. */
  async newSession(token: string, model: string): Promise<string> {
    const slug = `bench-${randomBytes(6).toString("hex")}`;
    const agent = await this.agentsRest<{ id: string }>(token, "POST", "/v1/agents", { name: slug, slug, model });
    const session = await this.agentsRest<{ id: string }>(token, "POST", "/v1/sessions", { agentId: agent.id });
    return session.id;
  }

  async close(): Promise<void> {
    for (const close of this.#closers.reverse()) {
      await close().catch((err) => console.error(`bench: cleanup failed: ${err}`));
    }
    rmSync(this.tmp, { recursive: true, force: true });
    // The sandboxes' session workspaces stay mounted for their grace window after a destroy (the local
    // driver's design); with the run's data directory gone nobody can use them again. Released now, as the
    // next compute start on this host would: a full run left ~200 loop devices until then.
    const { releaseOrphanedMounts } = await import("@platform/compute");
    await releaseOrphanedMounts().catch((err) => console.error(`bench: releasing workspace mounts failed: ${err}`));
  }
}
