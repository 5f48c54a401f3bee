export { type ApiKeyVerifier, type Caller, ENVD_VERSION, TEMPLATE } from "./control-plane.ts";
export { HOME } from "./paths.ts";
export { type E2bCompat, type E2bCompatOptions, startE2bCompat } from "./server.ts";
