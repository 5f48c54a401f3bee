import { ConfigError, host, internalTlsRows, logLevel, port, readSettings, url } from "@platform/config";

export { ConfigError };

const HTTP = ["http:", "https:"] as const;

/** Every setting of the e2b service, in the order `--settings` and the README list them. */
export const E2B_SETTINGS = {
  port: port("E2B_PORT", {
    default: 3030,
    doc: "the E2B surface, plain HTTP/1.1: the control plane (the SDK's `E2B_API_URL`) and every sandbox's envd (its `E2B_SANDBOX_URL`; the SDK names the sandbox in `E2b-Sandbox-Id`). A platform API key with `sessions:run` in `X-API-KEY`; envd calls carry the sandbox's access token",
  }),
  host: host(),
  ...internalTlsRows({
    files:
      "PEM paths: the platform CA and the e2b certificate (CN `e2b`), presented to compute (whose `ComputeService` answers `agents` and `e2b`) and identity (whose `VerifyToken` answers it)",
    off: "`off`: plaintext calls to compute and identity, development and tests only",
  }),
  computeGrpcUrl: url("COMPUTE_GRPC_URL", { protocols: HTTP, required: true, doc: "e.g. `https://127.0.0.1:50052`" }),
  identityGrpcUrl: url("IDENTITY_GRPC_URL", { protocols: HTTP, required: true, doc: "e.g. `https://127.0.0.1:50051`" }),
  logLevel: logLevel(),
};

export interface E2bConfig {
  port: number;
  host: string;
  computeGrpcUrl: string;
  identityGrpcUrl: string;
  logLevel: string;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): E2bConfig {
  const s = readSettings(E2B_SETTINGS, env);
  return {
    port: s.port,
    host: s.host,
    computeGrpcUrl: s.computeGrpcUrl as string,
    identityGrpcUrl: s.identityGrpcUrl as string,
    logLevel: s.logLevel,
  };
}
