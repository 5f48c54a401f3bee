import { type JsonObject, type JsonValue, type Message, toJson } from "@bufbuild/protobuf";
import type { Route } from "@platform/rpc";

export interface RestRequest {
  method: string;
  /** Path and query, percent-encoded. */
  path: string;
  body?: string;
}

/**
 * Percent-encodes text as UTF-8, except that a lone surrogate is written as
 * the three bytes its code unit would take (WTF-8, e.g. %ED%A0%80): the
 * closest a URL can come to carrying one. encodeURIComponent throws on it.
 */
export function percentEncode(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const paired =
      c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff;
    if (paired) {
      out += encodeURIComponent(s.slice(i, i + 2));
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join("");
    } else out += encodeURIComponent(s[i]!);
  }
  return out;
}

function take(json: JsonObject, path: string[]): JsonValue | undefined {
  let at: JsonValue | undefined = json;
  for (let i = 0; i < path.length - 1; i++) at = (at as JsonObject | undefined)?.[path[i]!];
  const obj = at as JsonObject | undefined;
  const last = path[path.length - 1]!;
  const v = obj?.[last];
  if (obj) delete obj[last];
  return v;
}

/**
 * The HTTP request a REST client sends for `message` on `route`: path
 * variables from their fields, the body per the rule's `body`, the rest as
 * query parameters (JSON names; strings, numbers and booleans only).
 */
export function restRequest(route: Route, message: Message): RestRequest {
  const json = toJson(route.method.input, message, { alwaysEmitImplicit: false }) as JsonObject;
  const values = new Map<number, string>();
  for (const v of route.template.variables) {
    const fields = route.pathFields.get(v.fieldPath.join("."))!;
    const value = take(
      json,
      fields.map((f) => f.jsonName),
    );
    values.set(v.start, percentEncode(typeof value === "string" ? value : value === undefined ? "" : String(value)));
  }
  const parts: string[] = [];
  for (let i = 0; i < route.template.segments.length; i++) {
    const variable = route.template.variables.find((v) => v.start === i);
    if (variable) {
      parts.push(values.get(i) ?? "");
      i = variable.end - 1;
      continue;
    }
    const s = route.template.segments[i]!;
    parts.push(s.kind === "literal" ? s.value : "x");
  }
  let path = `/${parts.join("/")}${route.template.verb ? `:${route.template.verb}` : ""}`;
  let body: string | undefined;
  if (route.body === "*") body = JSON.stringify(json);
  else {
    if (route.bodyField) {
      const v = take(json, [route.bodyField.jsonName]);
      body = JSON.stringify(v ?? {});
    }
    const query: string[] = [];
    for (const [k, v] of Object.entries(json)) {
      for (const item of Array.isArray(v) ? v : [v]) {
        if (typeof item === "string" || typeof item === "number" || typeof item === "boolean")
          query.push(`${percentEncode(k)}=${percentEncode(String(item))}`);
      }
    }
    if (query.length > 0) path += `?${query.join("&")}`;
  }
  return { method: route.httpMethod, path, body };
}
