import { IdentityClient } from "@platform/identity-client";
import { createServiceTransport, type ServiceTls } from "@platform/rpc";
import type { Logger } from "pino";
import type { E2bConfig } from "./config.ts";
import { grpcCompute } from "./grpc-compute.ts";
import { type E2bCompat, startE2bCompat } from "./server.ts";

/**
 * The e2b service: its listener, compute's ComputeService and identity's
 * VerifyToken over mutual TLS as the `e2b` certificate (`tls` undefined only
 * with INTERNAL_TLS=off).
 */
export async function startE2bApp(config: E2bConfig, logger: Logger, tls: ServiceTls | undefined): Promise<E2bCompat> {
  const transport = (baseUrl: string, expectServer: string) =>
    createServiceTransport({ baseUrl, tls, expectServer: tls ? expectServer : undefined });
  const identity = new IdentityClient(transport(config.identityGrpcUrl, "identity"));
  return startE2bCompat({
    compute: grpcCompute(transport(config.computeGrpcUrl, "compute")),
    verify: (key) => identity.verifyToken(key),
    logger,
    host: config.host,
    port: config.port,
  });
}
