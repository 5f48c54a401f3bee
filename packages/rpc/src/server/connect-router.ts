import { createConnectRouter, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { Health } from "@platform/gen/grpc/health/v1/health_pb";
import * as reflectionV1Pb from "@platform/gen/grpc/reflection/v1/reflection_pb";
import * as reflectionV1alphaPb from "@platform/gen/grpc/reflection/v1alpha/reflection_pb";
import { CallValues } from "../calls/call-values.ts";
import type { ServiceRegistration } from "../calls/registration.ts";
import { requestLimitOf } from "../calls/request-limit.ts";
import { currentRequest, requestInfoKey } from "../context.ts";
import { type HealthRegistry, healthService } from "../health/health.ts";
import { Reflector, reflectionV1, reflectionV1alpha } from "../reflection/reflection.ts";
import type { MakeRequestInfo } from "./request-info.ts";

export interface ConnectRouterOptions {
  services: ServiceRegistration[];
  /** The server's interceptors, outermost first. */
  interceptors: Interceptor[];
  bodyLimitBytes: number;
  shutdownSignal: AbortSignal;
  /** Serve grpc.health.v1 from this registry; undefined: no health service. */
  health: HealthRegistry | undefined;
  reflection: boolean;
  makeInfo: MakeRequestInfo;
}

export interface ConnectSide {
  /** Connect's handlers (gRPC, gRPC-Web, Connect) by procedure path. */
  byPath: Map<string, UniversalHandler>;
  /** What REST routes and the direct gRPC path call without Connect's handlers (the services, and health). */
  directServices: ServiceRegistration[];
}

/**
 * Connect's router for the services, gRPC health and server reflection. Every
 * call it serves, from the network or the REST transcoder, carries the
 * request's RequestInfo as a context value.
 */
export function createConnectSide(o: ConnectRouterOptions): ConnectSide {
  const router = createConnectRouter({
    interceptors: o.interceptors,
    readMaxBytes: o.bodyLimitBytes,
    shutdownSignal: o.shutdownSignal,
    // What connectNodeAdapter accepts by default; gRPC clients may compress.
    acceptCompression: [compressionGzip, compressionBrotli],
  });
  const serviceNames: string[] = [];
  for (const { service, impl } of o.services) {
    // Connect's limit is per service: the largest of its methods' own
    // (max_request_bytes); REST and plain gRPC apply each method's exactly.
    const limit = Math.max(...service.methods.map((m) => requestLimitOf(m, o.bodyLimitBytes)));
    router.service(service, impl as never, limit > o.bodyLimitBytes ? { readMaxBytes: limit } : undefined);
    serviceNames.push(service.typeName);
  }
  const files = o.services.map((s) => s.service.file);
  const directServices: ServiceRegistration[] = [...o.services];
  if (o.health) {
    const impl = healthService(o.health);
    router.service(Health, impl);
    directServices.push({ service: Health, impl });
    serviceNames.push(Health.typeName);
    files.push(Health.file);
  }
  if (o.reflection) {
    const names = [
      ...serviceNames,
      reflectionV1Pb.ServerReflection.typeName,
      reflectionV1alphaPb.ServerReflection.typeName,
    ];
    const reflector = new Reflector(
      [...files, reflectionV1Pb.ServerReflection.file, reflectionV1alphaPb.ServerReflection.file],
      names,
    );
    router.service(reflectionV1Pb.ServerReflection, reflectionV1(reflector));
    router.service(reflectionV1alphaPb.ServerReflection, reflectionV1alpha(reflector));
  }

  const wrap = (h: UniversalHandler): UniversalHandler =>
    Object.assign(
      (req: Parameters<UniversalHandler>[0]) => {
        const contextValues = req.contextValues ?? new CallValues();
        const info =
          contextValues.get(requestInfoKey) ??
          currentRequest() ??
          o.makeInfo(req.header.get("x-request-id"), req.header.get("x-trace-id"));
        contextValues.set(requestInfoKey, info);
        return h({ ...req, contextValues });
      },
      {
        requestPath: h.requestPath,
        protocolNames: h.protocolNames,
        allowedMethods: h.allowedMethods,
        supportedContentType: h.supportedContentType,
        service: h.service,
        method: h.method,
      },
    );
  const byPath = new Map(router.handlers.map((h) => [h.requestPath, wrap(h)]));
  return { byPath, directServices };
}
