import { type DescMethod, getOption, hasOption } from "@bufbuild/protobuf";
import { http } from "@platform/gen/google/api/annotations_pb";
import { type SseStream, sse, success_status } from "@platform/gen/platform/api/v1/options_pb";

// The client's reading of the REST annotations the services are transcoded
// from (the server's reader lives in @platform/rpc, which is Node-only).

/** One `google.api.http` binding: the verb, the path template, the body and response_body selectors. */
export interface HttpBinding {
  verb: string;
  path: string;
  body: string;
  responseBody: string;
}

/** The method's bindings, the main rule first; additional bindings inherit its response_body. */
export function httpBindingsOf(method: DescMethod): HttpBinding[] {
  if (!hasOption(method, http)) return [];
  const top = getOption(method, http);
  const out: HttpBinding[] = [];
  for (const rule of [top, ...top.additionalBindings]) {
    const p = rule.pattern;
    const responseBody = rule.responseBody || top.responseBody;
    if (p.case === "custom")
      out.push({ verb: p.value.kind.toUpperCase(), path: p.value.path, body: rule.body, responseBody });
    else if (p.case !== undefined)
      out.push({ verb: p.case.toUpperCase(), path: p.value, body: rule.body, responseBody });
  }
  return out;
}

/** `(platform.api.v1.success_status)`, 200 when unset. */
export function successStatusOf(method: DescMethod): number {
  return (hasOption(method, success_status) ? getOption(method, success_status) : 0) || 200;
}

/** `(platform.api.v1.sse)`: how the method's stream is framed as Server-Sent Events. */
export function sseOf(method: DescMethod): SseStream | undefined {
  return hasOption(method, sse) ? getOption(method, sse) : undefined;
}
