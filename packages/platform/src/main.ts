#!/usr/bin/env node
// The one command: every service of the platform on this machine, on its
// embedded defaults (PGlite under the data directory, the local sandbox
// driver, local tenant workers, the dev model unless a provider is set).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensurePki } from "@platform/pki";
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
  // The private CA and one certificate per service (keys 0600), made on the
  // first start and reused after; the services talk to each other over
  // mutual TLS with them, and the operator's is for buf curl at the console.
  const pki = await ensurePki(join(config.dataDir, "tls"), { hosts: [config.host] });
  if (pki.issued.length > 0) log(`platform: issued certificates in ${pki.dir}: ${pki.issued.join(", ")}`);
  const { services, endpoints } = platformServices(config, secrets, pki.files);
  const operator = pki.files("operator");
  const probeTls = { ca: readFileSync(operator.caFile), cert: readFileSync(operator.certFile), key: readFileSync(operator.keyFile) };

  let shuttingDown = false;
  const supervisor = new Supervisor(
    log,
    (name, code) => {
      if (shuttingDown) return;
      log(`platform: ${name} exited unexpectedly (code ${code}); stopping everything`);
      void shutdown(1);
    },
    probeTls,
  );
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
    `  agents gRPC     ${endpoints.agentsGrpc}`,
    `  runtime router  ${endpoints.router}`,
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
    "Ctrl-C stops everything.",
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().catch((err: unknown) => {
  log(`platform: ${(err as Error).message}`);
  process.exit(1);
});
