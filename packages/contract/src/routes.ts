import { type DescMethod, type DescService, getOption, hasOption } from "@bufbuild/protobuf";
import { http } from "@platform/gen/google/api/annotations_pb";
import { sse, success_status } from "@platform/gen/platform/api/v1/options_pb";

/** One REST binding of an RPC as the contract declares it. */
export type Route = {
  rpc: string;
  verb: string;
  path: string;
  body: string;
  responseBody: string;
  status: number;
  sse: boolean;
};

/** The google.api.http binding (and our status/SSE options) of a method, if any. */
export function routeOf(method: DescMethod): Route | undefined {
  if (!hasOption(method, http)) return undefined;
  const rule = getOption(method, http);
  const pattern = rule.pattern;
  const verb = pattern.case === "custom" ? pattern.value.kind.toUpperCase() : (pattern.case ?? "").toUpperCase();
  const path = pattern.case === "custom" ? pattern.value.path : ((pattern.value as string | undefined) ?? "");
  const status = hasOption(method, success_status) ? getOption(method, success_status) : 200;
  return {
    rpc: `${method.parent.typeName}/${method.name}`,
    verb,
    path,
    body: rule.body,
    responseBody: rule.responseBody,
    status,
    sse: hasOption(method, sse),
  };
}

/** Every REST route of the given services. */
export function routesOf(services: readonly DescService[]): Route[] {
  return services.flatMap((s) => s.methods.map(routeOf).filter((r): r is Route => r !== undefined));
}
