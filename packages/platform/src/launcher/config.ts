import { resolve } from "node:path";

/** Ports of the embedded shape; each can be moved with its environment variable. */
export type LauncherConfig = {
  dataDir: string;
  host: string;
  ports: { identityRest: number; identityGrpc: number; compute: number; agents: number; agentsGrpc: number; router: number };
  ownerEmail: string;
  ownerOrg: string;
};

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw new Error(`${name} must be a port number (1-65535), got ${JSON.stringify(raw)}`);
  return n;
}

export function loadLauncherConfig(env: NodeJS.ProcessEnv = process.env): LauncherConfig {
  return {
    dataDir: resolve(env.PLATFORM_DATA_DIR ?? ".data"),
    host: env.PLATFORM_HOST ?? "127.0.0.1",
    ports: {
      identityRest: port(env, "PLATFORM_IDENTITY_PORT", 8081),
      identityGrpc: port(env, "PLATFORM_IDENTITY_GRPC_PORT", 50051),
      compute: port(env, "PLATFORM_COMPUTE_PORT", 50052),
      agents: port(env, "PLATFORM_AGENTS_PORT", 8082),
      agentsGrpc: port(env, "PLATFORM_AGENTS_GRPC_PORT", 50053),
      router: port(env, "PLATFORM_ROUTER_PORT", 8080),
    },
    ownerEmail: env.PLATFORM_OWNER_EMAIL ?? "owner@example.com",
    ownerOrg: env.PLATFORM_OWNER_ORG ?? "My Org",
  };
}
