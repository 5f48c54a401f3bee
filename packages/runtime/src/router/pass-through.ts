import * as http from "node:http";
import agentsApi from "@platform/gen/openapi/agents.json" with { type: "json" };
import identityApi from "@platform/gen/openapi/identity.json" with { type: "json" };
import type { NodeRequest, NodeResponse } from "@platform/rpc";
import type { Logger } from "pino";

/** Where the router passes the other public services' REST/SSE paths: their public (REST) base URLs. */
export interface PassThroughTargets {
  identity?: string;
  agents?: string;
}

// Hop-by-hop headers (RFC 9110 7.6.1) are the connection's, not the message's.
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
]);

/**
 * The `/v1/...` paths each service's OpenAPI document (generated from the
 * contract's `google.api.http` rules) names, as patterns: a path the contract
 * gives identity goes to identity, one it gives agents to agents. A path
 * neither names is not passed on (the router answers its 404).
 */
function pathPatterns(doc: { paths: Record<string, unknown> }): RegExp[] {
  return Object.keys(doc.paths)
    .filter((p) => p.startsWith("/v1/") || p.startsWith("/.well-known/"))
    .map((p) => {
      const source = p
        .split(/(\{[^}]+\})/)
        .map((part) => (part.startsWith("{") ? "[^/]+" : part.replace(/[.*+?^$()|[\]\\]/g, "\\$&")))
        .join("");
      return new RegExp(`^${source}$`);
    });
}

/**
 * Passes a request on to the service whose contract holds its path, streaming
 * both ways (request body in, answer out as it arrives: an SSE stream is
 * neither buffered nor cut, and a client that goes away closes the upstream
 * request, which the agents service treats as a disconnect, not a cancel).
 * Returns false for a path no target serves.
 */
export function passThrough(targets: PassThroughTargets, logger: Logger) {
  const table: Array<{ name: string; base: URL; patterns: RegExp[] }> = [];
  if (targets.identity)
    table.push({ name: "identity", base: new URL(targets.identity), patterns: pathPatterns(identityApi) });
  if (targets.agents) table.push({ name: "agents", base: new URL(targets.agents), patterns: pathPatterns(agentsApi) });
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  return async function forward(req: NodeRequest, res: NodeResponse): Promise<boolean> {
    const url = req.url ?? "/";
    const path = url.split("?")[0]!;
    const target = table.find((t) => t.patterns.some((p) => p.test(path)));
    if (!target) return false;
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (v === undefined || k.startsWith(":") || HOP_BY_HOP.has(k)) continue;
      headers[k] = v;
    }
    // The browser's Origin is the router's own (same origin), which the
    // service's CORS list need not name: the service sees a same-origin call.
    delete headers.origin;
    headers["x-forwarded-host"] = req.headers.host ?? req.headers[":authority"];
    // The address the router saw, replacing any X-Forwarded-For the client sent (it could name any address):
    // identity believes it from the router's address only (LOGIN_TRUSTED_PROXIES) and throttles logins by it.
    delete headers["x-forwarded-for"];
    const peer = req.socket?.remoteAddress?.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, "$1");
    if (peer) headers["x-forwarded-for"] = peer;
    await new Promise<void>((resolve) => {
      let done = false;
      const upstream = http.request(
        {
          protocol: target.base.protocol,
          hostname: target.base.hostname,
          port: target.base.port,
          method: req.method,
          path: url,
          headers,
          agent,
        },
        (answer) => {
          const out: http.OutgoingHttpHeaders = {};
          for (const [k, v] of Object.entries(answer.headers)) {
            if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
          }
          res.writeHead(answer.statusCode ?? 502, out);
          // SSE: every chunk is written as it comes (no compression, no buffering here).
          if (typeof (res as http.ServerResponse).flushHeaders === "function")
            (res as http.ServerResponse).flushHeaders();
          const sink = res as http.ServerResponse;
          answer.on("data", (chunk: Buffer) => sink.write(chunk));
          answer.on("end", () => {
            done = true;
            res.end();
            resolve();
          });
          answer.on("error", () => {
            res.destroy();
            resolve();
          });
        },
      );
      upstream.on("error", (err) => {
        logger.warn({ err: err.message, service: target.name }, "pass-through: the service did not answer");
        if (!res.headersSent) {
          const body = JSON.stringify({ error: { code: "unavailable", message: `${target.name} is not reachable` } });
          res.writeHead(503, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
          res.end(body);
        } else res.destroy();
        resolve();
      });
      // The caller went away (a page reload): the upstream request ends too.
      res.on("close", () => {
        if (!done && !upstream.destroyed) upstream.destroy();
        resolve();
      });
      (req as http.IncomingMessage).pipe(upstream);
    });
    return true;
  };
}
