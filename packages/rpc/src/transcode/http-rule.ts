import { type DescMethod, getOption, hasOption } from "@bufbuild/protobuf";
import { http } from "@platform/gen/google/api/annotations_pb";
import type { HttpRule } from "@platform/gen/google/api/http_pb";
import {
  raw_bytes,
  type SseStream,
  sse,
  success_status,
  tolerant_body,
} from "@platform/gen/platform/api/v1/options_pb";

// The one reader of a method's REST annotations: the transcoder builds its
// routes from it, the contract tests hold the same bindings to the spec, and
// the client SDK builds its requests from it (`@platform/rpc/http-rule`, a
// subpath that imports nothing of Node, so browsers can bundle it).

/** One `google.api.http` binding of a method: its rule, or one of the rule's additional_bindings. */
export interface HttpBinding {
  /** The HTTP method, upper case (a custom pattern's kind as written, upper-cased). */
  verb: string;
  /** The path template as written. */
  path: string;
  /** "" (no body), "*" or a top-level request field. */
  body: string;
  /** This binding's own response_body ("" when it names none). */
  responseBody: string;
  /** The method's top-level rule (additional bindings inherit its response_body in the transcoder). */
  rule: HttpRule;
}

function bindingOf(rule: HttpRule, top: HttpRule): HttpBinding | undefined {
  const p = rule.pattern;
  switch (p.case) {
    case "get":
    case "put":
    case "post":
    case "delete":
    case "patch":
      return { verb: p.case.toUpperCase(), path: p.value, body: rule.body, responseBody: rule.responseBody, rule: top };
    case "custom":
      return {
        verb: p.value.kind.toUpperCase(),
        path: p.value.path,
        body: rule.body,
        responseBody: rule.responseBody,
        rule: top,
      };
    default:
      // A rule without a pattern binds nothing.
      return undefined;
  }
}

/** The method's `google.api.http` bindings: the rule first, then its additional_bindings; none without the option. */
export function httpBindingsOf(method: DescMethod): HttpBinding[] {
  if (!hasOption(method, http)) return [];
  const rule = getOption(method, http);
  return [rule, ...rule.additionalBindings].flatMap((r) => bindingOf(r, rule) ?? []);
}

/** The method's `(platform.api.v1.success_status)`, 200 when unset. */
export function successStatusOf(method: DescMethod): number {
  return (hasOption(method, success_status) ? getOption(method, success_status) : 0) || 200;
}

/** The method's `(platform.api.v1.sse)` framing, when it is served as an SSE stream. */
export function sseOf(method: DescMethod): SseStream | undefined {
  return hasOption(method, sse) ? getOption(method, sse) : undefined;
}

/** Whether the method's `(platform.api.v1.tolerant_body)` is set. */
export function tolerantBodyOf(method: DescMethod): boolean {
  return hasOption(method, tolerant_body) && getOption(method, tolerant_body);
}

/** The method's `(platform.api.v1.raw_bytes)` field name: REST may carry it as the raw body; "" when unset. */
export function rawBytesOf(method: DescMethod): string {
  return hasOption(method, raw_bytes) ? getOption(method, raw_bytes) : "";
}
