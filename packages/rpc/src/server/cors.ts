import { ConfigError, custom, type Field } from "@platform/config";
import type { NodeRequest, NodeResponse } from "../http/node-io.ts";

/** The setting every public port reads: a comma-separated list of origins. */
export const CORS_SETTING = "CORS_ALLOWED_ORIGINS";

/**
 * Request headers a browser on an allowed origin may send: the bearer
 * credential, JSON bodies, Idempotency-Key, SSE resumption, what connect-web
 * sends, and the correlation ids.
 */
export const CORS_ALLOW_HEADERS = [
  "authorization",
  "content-type",
  "idempotency-key",
  "last-event-id",
  "connect-protocol-version",
  "x-request-id",
  "x-trace-id",
];

/** Response headers its scripts may read besides the CORS-safelisted ones. */
export const CORS_EXPOSE_HEADERS = [
  "x-request-id",
  "x-trace-id",
  "idempotent-replayed",
  "retry-after",
  "grpc-status",
  "grpc-message",
];

const ALLOW_METHODS = "GET, POST, PATCH, DELETE";
// How long a browser may reuse a preflight answer.
const MAX_AGE_SECONDS = "600";

/** A bad CORS_ALLOWED_ORIGINS: the platform's ConfigError naming it. */
export class CorsSettingError extends ConfigError {
  override name = "CorsSettingError";
  constructor(message: string) {
    super(CORS_SETTING, message);
  }
}

/** The CORS_ALLOWED_ORIGINS row of a service with a public port; `doc` says which port. */
export function corsAllowedOriginsSetting(doc: string): Field<string[]> {
  return custom(CORS_SETTING, { shown: "unset", doc, read: (env) => parseAllowedOrigins(env[CORS_SETTING]) });
}

/**
 * Parses CORS_ALLOWED_ORIGINS: origins (`scheme://host[:port]`, http or
 * https, nothing after the port), comma-separated; empty or unset is none.
 * `*` is refused: the platform has no public data, so every caller that may
 * read an answer is named.
 */
export function parseAllowedOrigins(value: string | undefined): string[] {
  const out: string[] = [];
  for (const raw of (value ?? "").split(",")) {
    const item = raw.trim();
    if (item === "") continue;
    let url: URL;
    try {
      url = new URL(item);
    } catch {
      throw new CorsSettingError(`${CORS_SETTING}: "${item}" is not an origin (scheme://host[:port])`);
    }
    const bare = item.replace(/\/$/, "");
    if (!/^https?:$/.test(url.protocol) || url.origin.toLowerCase() !== bare.toLowerCase()) {
      throw new CorsSettingError(
        `${CORS_SETTING}: "${item}" is not an origin (http or https scheme://host[:port], no path)`,
      );
    }
    if (!out.includes(url.origin)) out.push(url.origin);
  }
  return out;
}

/**
 * CORS for a public port. An Origin on the list gets
 * Access-Control-Allow-Origin (that origin), the exposed headers and, on a
 * preflight, 204 with the allowed methods and headers. A preflight from
 * any other origin (all of them when the list is empty, the default) is
 * 403 `origin_not_allowed` without CORS headers, so the browser blocks the
 * call. Other requests are served as they are; without the headers a
 * browser does not let the page read the answer, and no credential rides
 * along by itself (bearer tokens, no cookies), so a cross-site request can
 * do nothing a page could not already do without a token.
 */
export function corsHandler(allowedOrigins: readonly string[]) {
  const allowed = new Set(allowedOrigins);
  /**
   * Sets the CORS headers of the answer. "answered": a preflight got its
   * 204; "refused": a preflight from an origin not allowed (the caller
   * answers 403); "continue": serve the request.
   */
  return function cors(req: NodeRequest, res: NodeResponse): "answered" | "refused" | "continue" {
    const origin = req.headers.origin;
    const preflight = req.method === "OPTIONS" && req.headers["access-control-request-method"] !== undefined;
    const ok = typeof origin === "string" && allowed.has(origin);
    // Caches must keep one answer per Origin.
    if (allowed.size > 0) res.setHeader("vary", "Origin");
    if (ok) {
      res.setHeader("access-control-allow-origin", origin);
      res.setHeader("access-control-expose-headers", CORS_EXPOSE_HEADERS.join(", "));
    }
    if (!preflight) return "continue";
    if (!ok) return "refused";
    res.setHeader("vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
    res.setHeader("access-control-allow-methods", ALLOW_METHODS);
    res.setHeader("access-control-allow-headers", CORS_ALLOW_HEADERS.join(", "));
    res.setHeader("access-control-max-age", MAX_AGE_SECONDS);
    res.writeHead(204);
    res.end();
    return "answered";
  };
}
