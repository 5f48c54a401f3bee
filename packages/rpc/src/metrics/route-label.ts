import type { NodeRequest } from "../http/node-io.ts";
import { lookupRoute, type Route } from "../transcode/routes.ts";

const PROBES = ["/livez", "/healthz", "/readyz", "/metrics"];

/**
 * The `route` label of a request: the probe or document path, the procedure path of an
 * RPC the server knows, the path template of the REST route it matched
 * (`/v1/agents/{agent_id}`), else `unmatched`. Never the raw path: ids in
 * paths would make a series per id. Worked out once the response has ended,
 * so routing itself pays nothing for it.
 */
export function routeLabeler(
  routes: Route[],
  procedures: { has(path: string): boolean },
  documents: readonly string[] = [],
) {
  const fixed = new Set([...PROBES, ...documents]);
  return (req: NodeRequest): string => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (fixed.has(path) || procedures.has(path)) return path;
    const found = lookupRoute(routes, req.method ?? "GET", path);
    return found.kind === "found" ? found.route.template.source : "unmatched";
  };
}
