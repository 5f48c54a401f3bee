import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SERVICE_ENTRIES } from "../launcher/services.ts";
import { seedEmbeddedDatabases } from "./embedded-databases.ts";
import { freePort } from "./free-port.ts";
import { serviceArgv } from "./service-bundles.ts";

// Tests that start a platform take their other ports from here too.
export { freePort };

const root = new URL("../../../../", import.meta.url).pathname;

export const OWNER = { email: "owner@example.com", password: "correct-horse-battery" };

type Proc = { name: string; child: ChildProcess; log: string[] };

export type PlatformStack = {
  /** The throw-away data directory: platform.json (the endpoints) is in it, as the launcher writes it. */
  dataDir: string;
  endpoints: {
    identity: string;
    agents: string;
    router: string;
    identityGrpc: string;
    computeGrpc: string;
    agentsGrpc: string;
  };
  /** Environment for the CLI: this data directory and a config directory of its own. */
  env: NodeJS.ProcessEnv;
  logs(): string;
  stop(): Promise<void>;
};

/**
 * identity, compute, agents and the runtime router, each its real main as a
 * process, on free ports, with embedded PGlite databases in a throw-away data
 * directory. Internal hops are plaintext (INTERNAL_TLS=off): these tests are
 * about the public surfaces the CLI uses.
 */
export async function startPlatform(
  options: {
    env?: Record<string, string>;
    /** Node options before a service's entry (e.g. --cpu-prof, which NODE_OPTIONS does not take). */
    nodeArgs?: Partial<Record<keyof typeof SERVICE_ENTRIES, string[]>>;
  } = {},
): Promise<PlatformStack> {
  const host = "127.0.0.1";
  const dataDir = mkdtempSync(join(tmpdir(), "platform-cli-"));
  // The sandbox's mapped user must traverse it (mkdtemp makes 0700).
  chmodSync(dataDir, 0o755);
  await seedEmbeddedDatabases(dataDir);
  const ports: number[] = [];
  while (ports.length < 6) {
    const p = await freePort(host);
    if (!ports.includes(p)) ports.push(p);
  }
  const [idRest, idGrpc, compute, agents, agentsGrpc, router] = ports as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const url = (p: number) => `http://${host}:${p}`;
  const common = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    LOG_LEVEL: "warn",
    HOST: host,
    INTERNAL_TLS: "off",
    // Settings every service is given (e.g. CORS_ALLOWED_ORIGINS for a browser test's page).
    ...options.env,
  };
  const procs: Proc[] = [];
  const argv = await serviceArgv();
  const start = (name: keyof typeof SERVICE_ENTRIES, env: Record<string, string>) => {
    // After the launcher's flags (a later V8 flag wins), before the entry.
    const args = [...argv[name].slice(0, -1), ...(options.nodeArgs?.[name] ?? []), ...argv[name].slice(-1)];
    const child = spawn(process.execPath, args, {
      cwd: root,
      env: { ...common, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const log: string[] = [];
    const keep = (c: Buffer) => {
      log.push(c.toString());
      if (log.length > 200) log.shift();
    };
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    procs.push({ name, child, log });
  };
  // A test runner that gives up on the file (timeout) may skip `after`: the services must not outlive it.
  const reap = () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGKILL");
  };
  process.once("exit", reap);
  start("identity", {
    SERVER_PORT: String(idRest),
    IDENTITY_GRPC_PORT: String(idGrpc),
    IDENTITY_AUTHKEY_KEK: randomBytes(32).toString("hex"),
    IDENTITY_DATA_DIR: join(dataDir, "identity"),
    BOOTSTRAP_OWNER_EMAIL: OWNER.email,
    BOOTSTRAP_OWNER_PASSWORD: OWNER.password,
    BOOTSTRAP_ORG_NAME: "CLI Org",
    // As the launcher: the router's X-Forwarded-For is believed from its address.
    LOGIN_TRUSTED_PROXIES: host,
  });
  start("compute", {
    COMPUTE_PORT: String(compute),
    COMPUTE_DATA_DIR: join(dataDir, "compute"),
    COMPUTE_KEEP_SANDBOXES_ON_EXIT: "false",
  });
  start("agents", {
    AGENTS_PORT: String(agents),
    AGENTS_GRPC_PORT: String(agentsGrpc),
    AGENTS_DATA_DIR: join(dataDir, "agents"),
    IDENTITY_GRPC_URL: url(idGrpc),
    COMPUTE_GRPC_URL: url(compute),
  });
  start("runtime", {
    ROUTER_PORT: String(router),
    RUNTIME_DATA_DIR: join(dataDir, "runtime"),
    IDENTITY_GRPC_URL: url(idGrpc),
    AGENTS_GRPC_URL: url(agentsGrpc),
    RUNTIME_COLD_START_WAIT_MS: "120000",
    // As the launcher: identity's and agents' /v1 paths on the router's port too (the web console's one origin).
    ROUTER_IDENTITY_URL: url(idRest),
    ROUTER_AGENTS_URL: url(agents),
  });
  const logs = () =>
    procs.map((p) => `--- ${p.name} (exit ${p.child.exitCode})\n${p.log.join("").slice(-3000)}`).join("\n");
  const stop = async () => {
    process.off("exit", reap);
    await Promise.all(
      procs.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
            const kill = setTimeout(() => p.child.kill("SIGKILL"), 10_000);
            p.child.once("exit", () => {
              clearTimeout(kill);
              resolve();
            });
            p.child.kill("SIGTERM");
          }),
      ),
    );
    rmSync(dataDir, { recursive: true, force: true });
  };
  const endpoints = {
    identity: url(idRest),
    agents: url(agents),
    router: url(router),
    identityGrpc: url(idGrpc),
    computeGrpc: url(compute),
    agentsGrpc: url(agentsGrpc),
  };
  try {
    // PGlite and tsx start slowly on a loaded 2-core machine.
    const deadline = Date.now() + 300_000;
    for (const probe of [
      `${endpoints.identity}/readyz`,
      `${endpoints.computeGrpc}/livez`,
      `${endpoints.agents}/readyz`,
      `${endpoints.router}/readyz`,
    ]) {
      for (;;) {
        const dead = procs.find((p) => p.child.exitCode !== null);
        if (dead) throw new Error(`${dead.name} exited ${dead.child.exitCode}`);
        if (Date.now() > deadline) throw new Error(`${probe} not ready in time`);
        if (
          await fetch(probe).then(
            (r) => r.ok,
            () => false,
          )
        )
          break;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  } catch (err) {
    const message = `${(err as Error).message}\n${logs()}`;
    await stop();
    throw new Error(message);
  }
  writeFileSync(join(dataDir, "platform.json"), JSON.stringify({ endpoints }, null, 2));
  const configDir = join(dataDir, "cli-config");
  mkdirSync(configDir);
  const env = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    PLATFORM_DATA_DIR: dataDir,
    PLATFORM_CONFIG_DIR: configDir,
  };
  return { dataDir, endpoints, env, logs, stop };
}
