import { type DescField, type DescMethod, type DescService, ScalarType } from "@bufbuild/protobuf";
import type { SseStream } from "@platform/gen/platform/api/v1/options_pb";
import { type HttpBinding, httpBindingsOf, rawBytesOf, sseOf, successStatusOf, tolerantBodyOf } from "./http-rule.ts";
import { BindError, findField, resolveFieldPath } from "./json.ts";
import { compareScores, matchTemplate, type PathTemplate, parseTemplate, pathParts } from "./path-template.ts";

/** One REST binding of an RPC (the rule itself or one of its additional_bindings). */
export interface Route {
  method: DescMethod;
  httpMethod: string;
  template: PathTemplate;
  /** Path variables: dotted path → resolved fields. */
  pathFields: Map<string, DescField[]>;
  /** "" (no body), "*" or a top-level request field. */
  body: string;
  bodyField?: DescField;
  responseBodyField?: DescField;
  successStatus: number;
  sse?: SseStream;
  /** An unreadable body is read as far as it can be, else as the empty request (`tolerant_body`). */
  tolerantBody: boolean;
  /** `raw_bytes`: the request field an application/octet-stream body is (routes with a body). */
  rawRequest?: DescField;
  /** `raw_bytes`: the response field answered as the body to `Accept: application/octet-stream`, and the others (headers). */
  rawResponse?: { field: DescField; headers: Array<{ field: DescField; name: string }> };
}

/** Two REST routes that collide, or an annotation the transcoder cannot serve. */
export class RouteConfigError extends Error {
  override name = "RouteConfigError";
}

function routeOf(method: DescMethod, binding: HttpBinding): Route | undefined {
  const { verb: httpMethod, path } = binding;
  const where = `${method.parent.typeName}.${method.name} (${httpMethod} ${path})`;
  try {
    const template = parseTemplate(path);
    const pathFields = new Map<string, DescField[]>();
    for (const v of template.variables) {
      const fields = resolveFieldPath(method.input, v.fieldPath);
      const last = fields[fields.length - 1]!;
      if (last.fieldKind === "list" || last.fieldKind === "map") {
        throw new BindError(`path variable ${v.fieldPath.join(".")} is repeated`);
      }
      pathFields.set(v.fieldPath.join("."), fields);
    }
    let bodyField: DescField | undefined;
    if (binding.body !== "" && binding.body !== "*") {
      bodyField = findField(method.input, binding.body);
      if (!bodyField) throw new BindError(`body field "${binding.body}" not in ${method.input.typeName}`);
    }
    let responseBodyField: DescField | undefined;
    // An additional binding without its own response_body takes the rule's.
    const responseBody = binding.responseBody || binding.rule.responseBody;
    if (responseBody !== "") {
      responseBodyField = findField(method.output, responseBody);
      if (!responseBodyField) throw new BindError(`response_body "${responseBody}" not in ${method.output.typeName}`);
    }
    const stream = sseOf(method);
    const raw = rawOf(method, binding.body, stream !== undefined);
    if (method.methodKind !== "unary" && !(method.methodKind === "server_streaming" && stream)) {
      // Only unary RPCs and SSE-framed server streams have a REST form.
      return undefined;
    }
    return {
      method,
      httpMethod,
      template,
      pathFields,
      body: binding.body,
      bodyField,
      responseBodyField,
      successStatus: successStatusOf(method),
      sse: stream,
      tolerantBody: tolerantBodyOf(method),
      ...raw,
    };
  } catch (e) {
    throw new RouteConfigError(`${where}: ${(e as Error).message}`);
  }
}

/** The raw forms a method's `raw_bytes` gives a binding: a bytes field of the request (with a body) and of the response. */
function rawOf(method: DescMethod, body: string, streamed: boolean): Pick<Route, "rawRequest" | "rawResponse"> {
  const name = rawBytesOf(method);
  if (name === "") return {};
  if (streamed) throw new BindError("raw_bytes on an SSE stream");
  const isBytes = (f: DescField | undefined) => f?.fieldKind === "scalar" && f.scalar === ScalarType.BYTES;
  const inField = findField(method.input, name);
  const outField = findField(method.output, name);
  if (!isBytes(inField) && !isBytes(outField)) throw new BindError(`raw_bytes "${name}" is no bytes field`);
  const out: Pick<Route, "rawRequest" | "rawResponse"> = {};
  if (isBytes(inField) && (body === "*" || body === name)) out.rawRequest = inField;
  if (isBytes(outField)) {
    const headers = method.output.fields
      .filter((f) => f !== outField)
      .map((f) => {
        if (f.fieldKind !== "scalar" && f.fieldKind !== "enum")
          throw new BindError(`raw_bytes: response field ${f.name} is not a scalar (it would be a header)`);
        return { field: f, name: `x-${f.name.replaceAll("_", "-")}` };
      });
    out.rawResponse = { field: outField as DescField, headers };
  }
  return out;
}

/** Every REST binding declared by google.api.http on the services' methods. */
export function collectRoutes(services: DescService[]): Route[] {
  const routes: Route[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      for (const binding of httpBindingsOf(method)) {
        const route = routeOf(method, binding);
        if (route) routes.push(route);
      }
    }
  }
  return routes;
}

export type RouteLookup =
  | { kind: "found"; route: Route; values: Map<string, string> }
  | { kind: "method_not_allowed"; allow: string[] }
  | { kind: "not_found" };

/** Picks the most specific route for a method and raw path. */
export function lookupRoute(routes: Route[], httpMethod: string, rawPath: string): RouteLookup {
  // HEAD is answered like GET without a body.
  const want = httpMethod === "HEAD" ? "GET" : httpMethod;
  let best: { route: Route; values: Map<string, string>; score: number[] } | undefined;
  const allow = new Set<string>();
  const split = pathParts(rawPath);
  for (const route of routes) {
    const m = matchTemplate(route.template, rawPath, split);
    if (!m) continue;
    allow.add(route.httpMethod);
    if (route.httpMethod !== want) continue;
    if (!best || compareScores(m.score, best.score) > 0) best = { route, values: m.values, score: m.score };
  }
  if (best) return { kind: "found", route: best.route, values: best.values };
  if (allow.size > 0) return { kind: "method_not_allowed", allow: [...allow].sort() };
  return { kind: "not_found" };
}
