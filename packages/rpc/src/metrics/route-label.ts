import type { NodeRequest } from "../http/node-io.ts";
import type { RequestHead } from "../server/first-request.ts";
import { lookupRoute, type Route } from "../transcode/routes.ts";

const PROBES = ["/livez", "/healthz", "/readyz", "/metrics"];
// Paths looked up for requests that were not routed (refused before routing,
// a 404): a login storm shed before routing costs one lookup, not one each.
const CACHE_ENTRIES = 1024;
const CACHED_PATH_LENGTH = 256;

export interface RouteLabeler {
  /** The REST handler matched `route` for the request (so its label needs no second lookup). */
  routed(req: NodeRequest, route: Route): void;
  /** The request's `route` label, once its response has ended (or of a head refused before a request was made). */
  of(req: NodeRequest | RequestHead): string;
}

/**
 * The `route` label of a request: the probe or document path, the procedure
 * path of an RPC the server knows, the path template of the REST route it
 * matched (`/v1/sessions/{id}/messages`), else `unmatched`. Never the raw
 * path: ids in paths would make a series per id.
 */
export function routeLabeler(
  routes: Route[],
  procedures: { has(path: string): boolean },
  documents: readonly string[] = [],
): RouteLabeler {
  const fixed = new Set([...PROBES, ...documents]);
  const matched = new WeakMap<object, string>();
  const cache = new Map<string, string>();
  return {
    routed(req, route) {
      matched.set(req, route.template.source);
    },
    of(req) {
      const known = matched.get(req);
      if (known !== undefined) return known;
      const path = (req.url ?? "/").split("?")[0]!;
      if (fixed.has(path) || procedures.has(path)) return path;
      const key = `${req.method} ${path}`;
      const cached = cache.get(key);
      if (cached !== undefined) return cached;
      const found = lookupRoute(routes, req.method ?? "GET", path);
      const label = found.kind === "found" ? found.route.template.source : "unmatched";
      if (path.length <= CACHED_PATH_LENGTH) {
        if (cache.size >= CACHE_ENTRIES) cache.clear();
        cache.set(key, label);
      }
      return label;
    },
  };
}
