import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Health, HealthCheckResponse_ServingStatus } from "@platform/gen/grpc/health/v1/health_pb";
import { platformErrors } from "./platform-errors.ts";

export interface GrpcServerOptions {
  /** Registers the services; health reports SERVING for `serviceNames`. */
  routes: (router: ConnectRouter) => void;
  serviceNames: string[];
  port?: number;
  host?: string;
}

export interface RunningServer {
  port: number;
  url: string;
  close(): Promise<void>;
}

/**
 * A plain h2c gRPC server (plus Connect and gRPC-Web over HTTP/2) with gRPC
 * health reporting SERVING for every registered service. It is the worker's
 * server until @platform/rpc's createServer is available.
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<RunningServer> {
  const names = new Set(["", ...options.serviceNames]);
  const handler = connectNodeAdapter({
    interceptors: [platformErrors],
    routes(router) {
      options.routes(router);
      router.service(Health, {
        check(req) {
          return {
            status: names.has(req.service)
              ? HealthCheckResponse_ServingStatus.SERVING
              : HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN,
          };
        },
      });
    },
  });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host && options.host !== "0.0.0.0" ? options.host : "127.0.0.1";
  return {
    port,
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) s.close();
        setTimeout(() => {
          for (const s of sessions) s.destroy();
        }, 2000).unref();
      }),
  };
}
