export { startE2bApp } from "./app.ts";
export type { ComputePort } from "./compute-port.ts";
export { E2B_SETTINGS, type E2bConfig, loadConfig } from "./config.ts";
export { type ApiKeyVerifier, type Caller, ENVD_VERSION, TEMPLATE } from "./control-plane.ts";
export { grpcCompute } from "./grpc-compute.ts";
export { HOME } from "./paths.ts";
export { type E2bCompat, type E2bCompatOptions, startE2bCompat } from "./server.ts";
