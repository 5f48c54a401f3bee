#!/usr/bin/env node
// The one command: every service of the platform on this machine, on its
// embedded defaults (PGlite under the data directory, the local sandbox
// driver, local tenant workers, the dev model unless a provider is set).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadLauncherConfig } from "./launcher/config.ts";
import { loadOrCreateSecrets } from "./launcher/secrets.ts";
import { platformServices } from "./launcher/services.ts";
import { Supervisor } from "./launcher/supervisor.ts";

const log = (line: string) => process.stderr.write(`${line}\n`);

async function main(): Promise<void> {
  const config = loadLauncherConfig();
  // 0755: sandboxes run as an unprivileged user and must reach their workspaces
  // below it; the secrets file itself is 0600.
  mkdirSync(config.dataDir, { recursive: true, mode: 0o755 });
  const { secrets, created } = loadOrCreateSecrets(config.dataDir);
  const { services, endpoints } = platformServices(config, secrets);

  let shuttingDown = false;
  const supervisor = new Supervisor(log, (name, code) => {
    if (shuttingDown) return;
    log(`platform: ${name} exited unexpectedly (code ${code}); stopping everything`);
    void shutdown(1);
  });
  const shutdown = async (code: number) => {
    if (shuttingDown) return;
    shuttingDown = true;
    log("platform: stopping");
    await supervisor.stopAll();
    process.exit(code);
  };
  process.on("SIGINT", () => void shutdown(0));
  process.on("SIGTERM", () => void shutdown(0));

  for (const service of services) {
    log(`platform: starting ${service.name}`);
    await supervisor.start(service);
  }

  const file = join(config.dataDir, "platform.json");
  writeFileSync(
    file,
    JSON.stringify({ endpoints, owner: { email: config.ownerEmail }, pid: process.pid, startedAt: new Date().toISOString() }, null, 2),
  );

  const cli = "node packages/platform/bin/platform.mjs";
  const lines = [
    "",
    "The platform is running. Endpoints:",
    `  identity REST   ${endpoints.identity}`,
    `  identity gRPC   ${endpoints.identityGrpc}`,
    `  compute gRPC    ${endpoints.computeGrpc}`,
    `  agents REST     ${endpoints.agents}`,
    `  runtime router  ${endpoints.router}`,
    `  (written to ${file})`,
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
    "Ctrl-C stops everything.",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().catch((err: unknown) => {
  log(`platform: ${(err as Error).message}`);
  process.exit(1);
});
