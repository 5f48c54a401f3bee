#!/usr/bin/env node
// The one command: every service of the platform on this machine, on its
// embedded defaults (PGlite under the data directory, the local sandbox
// driver, local tenant workers, the dev model unless a provider is set),
// kept running: a crashed service is restarted (launcher/supervisor.ts).
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { listSettingsIfAsked } from "@platform/config";
import { newPgliteClusters } from "@platform/db/pglite-clusters";
import { ensurePki } from "@platform/pki";
import { BUNDLES_ENV, bundlesFromEnv } from "./launcher/bundles.ts";
import { LAUNCHER_SETTINGS, loadLauncherConfig } from "./launcher/config.ts";
import { loadOrCreateSecrets } from "./launcher/secrets.ts";
import { RotatingFile, redactor, ServiceLog } from "./launcher/service-log.ts";
import { embeddedDatabaseDirs, platformServices } from "./launcher/services.ts";
import { type PlatformFile, writePlatformFile } from "./launcher/status-file.ts";
import { Supervisor } from "./launcher/supervisor.ts";

let log = (line: string): void => void process.stderr.write(`${line}\n`);

async function main(): Promise<void> {
  // `--settings`: the table of every launcher setting (the README's), then exit.
  listSettingsIfAsked(LAUNCHER_SETTINGS);
  const config = loadLauncherConfig(process.env, process.argv.slice(2));
  // 0755: sandboxes run as an unprivileged user and must reach their workspaces
  // below it; the secrets file itself is 0600.
  mkdirSync(config.dataDir, { recursive: true, mode: 0o755 });
  const { secrets, created } = loadOrCreateSecrets(config.dataDir);
  const logDir = join(config.dataDir, "logs");
  mkdirSync(logDir, { recursive: true, mode: 0o700 });
  // The launcher's own lines go to the console and to logs/launcher.log.
  const launcherLog = new RotatingFile(join(logDir, "launcher.log"), config.log.maxFileBytes);
  const redact = redactor([secrets.ownerPassword, secrets.kek]);
  log = (line: string) => {
    process.stderr.write(`${line}\n`);
    launcherLog.write(`${new Date().toISOString()} ${redact(line)}`);
  };
  // The private CA and one certificate per service (keys 0600), made on the
  // first start and reused after; the services talk to each other over
  // mutual TLS with them, and the operator's is for buf curl at the console.
  const pki = await ensurePki(join(config.dataDir, "tls"), { hosts: [config.host] });
  if (pki.issued.length > 0) log(`platform: issued certificates in ${pki.dir}: ${pki.issued.join(", ")}`);
  const { services, endpoints } = platformServices(config, secrets, pki.files);
  // Set by bin/start.mjs (run.sh); the services must not inherit it.
  const bundles = bundlesFromEnv(process.env);
  delete process.env[BUNDLES_ENV];
  for (const service of services) service.bundle = bundles[service.name];
  const operator = pki.files("operator");
  const probeTls = {
    ca: readFileSync(operator.caFile),
    cert: readFileSync(operator.certFile),
    key: readFileSync(operator.keyFile),
  };

  const file = join(config.dataDir, "platform.json");
  const status: Omit<PlatformFile, "services"> = {
    endpoints,
    owner: { email: config.ownerEmail },
    pid: process.pid,
    startedAt: new Date().toISOString(),
    state: "starting",
    logs: logDir,
  };
  let shuttingDown = false;
  const supervisor: Supervisor = new Supervisor({
    log: (line) => log(line),
    policy: config.restart,
    serviceLog: (name) =>
      new ServiceLog(name, {
        level: config.log.level,
        dir: logDir,
        maxFileBytes: config.log.maxFileBytes,
        secrets: [secrets.ownerPassword, secrets.kek],
        console: (line) => process.stderr.write(`${line}\n`),
      }),
    probeTls,
    onGiveUp: (reason) => {
      log(`platform: ${reason}`);
      log("platform: a service keeps crashing; stopping everything (see the logs above and in the log files)");
      void shutdown(1, "failed");
    },
    onChange: () => writePlatformFile(file, { ...status, services: supervisor.status() }),
  });
  const shutdown = async (code: number, final: PlatformFile["state"] = "stopped") => {
    if (shuttingDown) return;
    shuttingDown = true;
    log("platform: stopping");
    status.state = "stopping";
    await supervisor.stopAll();
    status.state = final;
    writePlatformFile(file, { ...status, services: supervisor.status() });
    launcherLog.close();
    process.exit(code);
  };
  process.on("SIGINT", () => void shutdown(0));
  process.on("SIGTERM", () => void shutdown(0));

  // A first start on the embedded databases: one initdb, copied, instead of one in each service (the
  // services would have run three in a row: about 5 s of CPU each). Unless they are given PostgreSQL.
  if (!process.env.DATABASE_URL) {
    // compute's directory with compute's own mode (its app.ts): sandboxes' users must traverse it.
    mkdirSync(join(config.dataDir, "compute"), { recursive: true, mode: 0o711 });
    await newPgliteClusters(embeddedDatabaseDirs(config.dataDir)).catch((err: Error) =>
      // Each service then makes its own, as it would have.
      log(`platform: the embedded databases were not made ahead of the services: ${err.message}`),
    );
  }

  for (const service of services) {
    log(`platform: starting ${service.name}`);
    try {
      await supervisor.start(service);
    } catch (err) {
      if (shuttingDown) return;
      // The ones already up must not outlive a launcher that failed to start.
      log(`platform: ${(err as Error).message}`);
      await shutdown(1, "failed");
      return;
    }
    if (shuttingDown) return;
  }
  status.state = "running";
  writePlatformFile(file, { ...status, services: supervisor.status() });

  const cli = "node packages/platform/bin/platform.mjs";
  const lines = [
    "",
    `Open the web console: ${endpoints.router}/   (sign in as ${config.ownerEmail}, password below)`,
    "",
    "The platform is running. Endpoints:",
    `  identity REST   ${endpoints.identity}`,
    `  identity gRPC   ${endpoints.identityGrpc}`,
    `  compute gRPC    ${endpoints.computeGrpc}`,
    `  agents REST     ${endpoints.agents}`,
    `  agents gRPC     ${endpoints.agentsGrpc}`,
    `  runtime router  ${endpoints.router}`,
    ...(endpoints.e2b ? [`  e2b (E2B SDK)   ${endpoints.e2b}   (E2B_API_URL and E2B_SANDBOX_URL)`] : []),
    `  (written to ${file}; the gRPC ports are mutual TLS: buf curl with`,
    `   --cacert ${operator.caFile} --cert ${operator.certFile} --key ${operator.keyFile})`,
    "",
    "Owner:",
    `  email     ${config.ownerEmail}`,
    created
      ? `  password  ${secrets.ownerPassword}`
      : `  password  unchanged since the first start (in ${join(config.dataDir, "secrets.json")})`,
    "",
    "Try:",
    `  ${cli} login --email ${config.ownerEmail} --password '<password>'`,
    `  ${cli} agents create --name helper --model dev/echo`,
    `  ${cli} chat --agent helper 'run: echo hello from the sandbox'`,
    "",
    `Logs: warnings and errors here (PLATFORM_LOG_LEVEL=info or --verbose for more), everything in ${logDir}/<service>.log.`,
    "A service that crashes is restarted; Ctrl-C stops everything.",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().catch((err: unknown) => {
  log(`platform: ${(err as Error).message}`);
  process.exit(1);
});
