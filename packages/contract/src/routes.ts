import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { httpBindingsOf, rawBytesOf, sseOf, successStatusOf } from "@platform/rpc";

/** One REST binding of an RPC as the contract declares it. */
export type Route = {
  rpc: string;
  verb: string;
  path: string;
  body: string;
  responseBody: string;
  status: number;
  sse: boolean;
  /** `(platform.api.v1.raw_bytes)`: the bytes field REST may carry as the raw body; "" when none. */
  raw: string;
};

/**
 * The google.api.http bindings (the rule, then its additional_bindings) of a
 * method, with our status/SSE options, read by the transcoder's own reader
 * (`httpBindingsOf` of @platform/rpc), so the contract tests check what is served.
 */
export function routesOfMethod(method: DescMethod): Route[] {
  return httpBindingsOf(method).map((binding) => ({
    rpc: `${method.parent.typeName}/${method.name}`,
    verb: binding.verb,
    path: binding.path,
    body: binding.body,
    responseBody: binding.responseBody,
    status: successStatusOf(method),
    sse: sseOf(method) !== undefined,
    raw: rawBytesOf(method),
  }));
}

/** The primary google.api.http binding of a method, if any. */
export function routeOf(method: DescMethod): Route | undefined {
  return routesOfMethod(method)[0];
}

/** Every REST route of the given services. */
export function routesOf(services: readonly DescService[]): Route[] {
  return services.flatMap((s) => s.methods.flatMap(routesOfMethod));
}
