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

/** The google.api.http bindings (the rule, then its additional_bindings) of a method, with our status/SSE options. */
export function routesOfMethod(method: DescMethod): Route[] {
  if (!hasOption(method, http)) return [];
  const rule = getOption(method, http);
  const status = hasOption(method, success_status) ? getOption(method, success_status) : 200;
  return [rule, ...rule.additionalBindings].map((binding) => {
    const pattern = binding.pattern;
    const verb = pattern.case === "custom" ? pattern.value.kind.toUpperCase() : (pattern.case ?? "").toUpperCase();
    const path = pattern.case === "custom" ? pattern.value.path : ((pattern.value as string | undefined) ?? "");
    return {
      rpc: `${method.parent.typeName}/${method.name}`,
      verb,
      path,
      body: binding.body,
      responseBody: binding.responseBody,
      status,
      sse: hasOption(method, sse),
    };
  });
}

/** The primary google.api.http binding of a method, if any. */
export function routeOf(method: DescMethod): Route | undefined {
  return routesOfMethod(method)[0];
}

/** Every REST route of the given services. */
export function routesOf(services: readonly DescService[]): Route[] {
  return services.flatMap((s) => s.methods.flatMap(routesOfMethod));
}
