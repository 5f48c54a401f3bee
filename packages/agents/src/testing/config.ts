import type { AgentsConfig } from "../config.ts";

/**
 * The configuration the in-process server tests run the agents service
 * with: ephemeral ports on loopback, the given identity and compute, small
 * limits; `overrides` for what a suite needs otherwise.
 */
export function testAgentsConfig(
  peers: Pick<AgentsConfig, "identityGrpcUrl" | "computeGrpcUrl">,
  overrides: Partial<AgentsConfig> = {},
): AgentsConfig {
  return {
    port: 0,
    grpcPort: 0,
    host: "127.0.0.1",
    dataDir: "",
    toolTimeoutMs: 5000,
    toolOutputLimitBytes: 16384,
    maxModelCalls: 10,
    maxTokens: 1024,
    runLeaseMs: 5000,
    logLevel: "silent",
    ...peers,
    ...overrides,
  };
}
