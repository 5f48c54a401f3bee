import { createHash, timingSafeEqual } from "node:crypto";
import { PlatformError } from "@platform/errors";
import type { Envelope } from "../envelope.ts";
import { headerOf, type NodeRequest, type NodeResponse, sendJson } from "../http/node-io.ts";
import type { ServerMetrics } from "./server-metrics.ts";

/** Where the Prometheus text format is served, on every listener that serves /livez. */
export const METRICS_PATH = "/metrics";

const digest = (s: string) => createHash("sha256").update(s).digest();

/**
 * GET /metrics: the registry in Prometheus' text format, to a caller that
 * presents `Authorization: Bearer <METRICS_TOKEN>` (compared in constant
 * time). A wrong or missing token is 401 with `WWW-Authenticate: Bearer`,
 * in the service's envelope; the metrics are never shown without it.
 */
export function metricsEndpoint(
  metrics: ServerMetrics,
  token: string,
  envelope: Envelope,
): (req: NodeRequest, res: NodeResponse) => Promise<void> {
  const expected = digest(`Bearer ${token}`);
  return async (req, res) => {
    const presented = headerOf(req, "authorization") ?? "";
    if (!timingSafeEqual(digest(presented), expected)) {
      res.setHeader("www-authenticate", 'Bearer realm="metrics"');
      const err = PlatformError.unauthenticated("a valid metrics bearer token is required");
      const { status, body } = envelope.render(err);
      return sendJson(res, status, body);
    }
    const text = await metrics.registry.metrics();
    res.writeHead(200, {
      "content-type": metrics.registry.contentType,
      "content-length": Buffer.byteLength(text),
      "cache-control": "no-store",
    });
    if (req.method === "HEAD") res.end();
    else res.end(text);
  };
}
