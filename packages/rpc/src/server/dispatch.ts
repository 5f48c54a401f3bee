import type * as http2 from "node:http2";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { PlatformError } from "@platform/errors";
import type { Envelope } from "../envelope.ts";
import type { GrpcDirect } from "../grpc/grpc-direct.ts";
import { type NodeRequest, type NodeResponse, sendJson } from "../http/node-io.ts";
import { METRICS_PATH } from "../metrics/metrics-endpoint.ts";
import type { corsHandler } from "./cors.ts";
import { serveNative } from "./native.ts";
import { lookupRoute, type Route } from "../transcode/routes.ts";
import { refuse } from "./refuse.ts";
import { PLATFORM_VERSION } from "./version.ts";

export interface DispatchOptions {
  /** The service's name, shown by the health endpoints. */
  name: string;
  envelope: Envelope;
  /** Public ports: CORS answers preflights and refuses other origins' ones. */
  cors: ReturnType<typeof corsHandler> | undefined;
  readiness: (() => Promise<boolean>) | undefined;
  /** ServerOptions.documents, as JSON text by path. */
  documents: ReadonlyMap<string, string>;
  /** A public port: procedure paths are not found. */
  restOnly: boolean;
  /** True once the server is shutting down (/readyz then says not ready). */
  closing: () => boolean;
  requestTimeoutMs: number;
  /** Connect's handlers by procedure path. */
  native: Map<string, UniversalHandler>;
  grpcDirect: GrpcDirect;
  rest: (req: NodeRequest, res: NodeResponse) => Promise<void>;
  /** ServerOptions.shed: a refusal before routing (REST paths only). */
  shed: ((req: NodeRequest, path: string) => PlatformError | undefined) | undefined;
  /** ServerOptions.unrouted, with the REST routes it is the fallback of. */
  unrouted: { serve: (req: NodeRequest, res: NodeResponse) => Promise<boolean>; routes: Route[] } | undefined;
  /** GET /metrics, when METRICS_TOKEN is set. */
  metrics: ((req: NodeRequest, res: NodeResponse) => Promise<void>) | undefined;
}

/**
 * Which piece serves a request, in order: CORS, the plain health endpoints,
 * then (public ports) REST only, else a plain gRPC call on the direct path,
 * a procedure path through Connect, and everything else as REST.
 */
export function createDispatch(o: DispatchOptions): (req: NodeRequest, res: NodeResponse) => Promise<void> {
  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (o.cors) {
      const outcome = o.cors(req, res);
      if (outcome === "answered") return;
      if (outcome === "refused") {
        const err = o.envelope.fault(
          "origin_not_allowed",
          `origin ${String(req.headers.origin ?? "(none)").slice(0, 200)} is not allowed`,
        );
        return sendJson(res, 403, o.envelope.render(err).body);
      }
    }
    if (req.method === "GET" || req.method === "HEAD") {
      if (path === "/livez" || path === "/healthz")
        return sendJson(res, 200, { status: "ok", service: o.name, version: PLATFORM_VERSION });
      if (path === METRICS_PATH && o.metrics) return o.metrics(req, res);
      if (path === "/readyz") {
        let ok = !o.closing();
        if (ok && o.readiness) ok = await o.readiness().catch(() => false);
        return sendJson(res, ok ? 200 : 503, {
          status: ok ? "ready" : "not_ready",
          service: o.name,
          version: PLATFORM_VERSION,
        });
      }
      const doc = o.documents.get(path);
      if (doc !== undefined) {
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(doc) });
        return void res.end(doc);
      }
    }
    if (o.shed && !o.native.has(path)) {
      const refusal = o.shed(req, path);
      if (refusal) return refuse(o.envelope, req, res, refusal);
    }
    if (o.restOnly) {
      // Public ports carry REST/SSE only: a procedure path (gRPC, Connect,
      // gRPC-Web, health, reflection) is not found here.
      if (o.native.has(path)) {
        return sendJson(res, 404, o.envelope.render(PlatformError.notFound("not served on this port")).body);
      }
      if (o.unrouted && lookupRoute(o.unrouted.routes, req.method ?? "GET", path).kind === "not_found") {
        if (await o.unrouted.serve(req, res)) return;
      }
      return o.rest(req, res);
    }
    if (req.httpVersionMajor === 2) {
      const direct = o.grpcDirect.match(req.method, path, req.headers);
      if (direct) return o.grpcDirect.serve(direct, req as http2.Http2ServerRequest, res as http2.Http2ServerResponse);
    }
    const native = o.native.get(path);
    if (native) return serveNative(native, req, res, o.requestTimeoutMs);
    return o.rest(req, res);
  };
}
