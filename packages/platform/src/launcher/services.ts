import { join } from "node:path";
import type { Endpoints } from "../cli/endpoints.ts";
import type { LauncherConfig } from "./config.ts";
import type { LocalSecrets } from "./secrets.ts";
import type { ServiceSpec } from "./supervisor.ts";

const root = new URL("../../../..", import.meta.url).pathname;

/** The four services of the embedded shape, in start order, with their settings. */
export function platformServices(config: LauncherConfig, secrets: LocalSecrets): { services: ServiceSpec[]; endpoints: Endpoints } {
  const { host, ports, dataDir } = config;
  const url = (port: number) => `http://${host}:${port}`;
  const endpoints: Endpoints = {
    identity: url(ports.identityRest),
    identityGrpc: url(ports.identityGrpc),
    computeGrpc: url(ports.compute),
    agents: url(ports.agents),
    agentsGrpc: url(ports.agents),
    router: url(ports.router),
  };
  const common = { LOG_LEVEL: process.env.LOG_LEVEL ?? "info", HOST: host };
  const services: ServiceSpec[] = [
    {
      name: "identity",
      entry: join(root, "packages/identity/src/main.ts"),
      readyUrl: `${endpoints.identity}/livez`,
      env: {
        ...common,
        SERVER_PORT: String(ports.identityRest),
        IDENTITY_GRPC_PORT: String(ports.identityGrpc),
        IDENTITY_AUTHKEY_KEK: secrets.kek,
        IDENTITY_DATA_DIR: join(dataDir, "identity"),
        BOOTSTRAP_OWNER_EMAIL: config.ownerEmail,
        BOOTSTRAP_OWNER_PASSWORD: secrets.ownerPassword,
        BOOTSTRAP_ORG_NAME: config.ownerOrg,
      },
    },
    {
      name: "compute",
      entry: join(root, "packages/compute/src/main.ts"),
      readyUrl: `${endpoints.computeGrpc}/livez`,
      // Ctrl-C stops the sandboxes too; a session's next tool call after a
      // restart gets a fresh sandbox state (FAILED ones are not revived).
      env: { ...common, COMPUTE_PORT: String(ports.compute), COMPUTE_DATA_DIR: join(dataDir, "compute"), COMPUTE_KEEP_SANDBOXES_ON_EXIT: "false" },
    },
    {
      name: "agents",
      entry: join(root, "packages/agents/src/main.ts"),
      readyUrl: `${endpoints.agents}/livez`,
      env: {
        ...common,
        AGENTS_PORT: String(ports.agents),
        AGENTS_DATA_DIR: join(dataDir, "agents"),
        IDENTITY_GRPC_URL: endpoints.identityGrpc!,
        COMPUTE_GRPC_URL: endpoints.computeGrpc!,
      },
    },
    {
      name: "runtime",
      entry: join(root, "packages/runtime/src/router/main.ts"),
      readyUrl: `${endpoints.router}/livez`,
      env: {
        ...common,
        ROUTER_PORT: String(ports.router),
        RUNTIME_WORKER_HOST: host,
        RUNTIME_DATA_DIR: join(dataDir, "runtime"),
        IDENTITY_GRPC_URL: endpoints.identityGrpc!,
        AGENTS_GRPC_URL: endpoints.agentsGrpc!,
      },
    },
  ];
  return { services, endpoints };
}
