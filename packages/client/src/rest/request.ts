import type { DescField, DescMessage, DescMethod, JsonObject, JsonValue, Message } from "@bufbuild/protobuf";
import { toJson } from "@bufbuild/protobuf";
import type { HttpBinding } from "@platform/rpc/http-rule";

/** One HTTP request of an RPC, as its google.api.http binding lays the message out. */
export interface HttpCall {
  verb: string;
  url: string;
  /** JSON text, or undefined for a binding without a body. */
  body: string | undefined;
  binding: HttpBinding;
}

const VARIABLE = /\{([^}=]+)(?:=([^}]*))?\}/g;

/**
 * The request of `method` for `input`: the first binding whose path
 * variables all have a value (the main rule comes first), the variables
 * filled in, the body field(s) as JSON and every other set field as a query
 * parameter, by its JSON name (the transcoder takes JSON or proto names).
 */
export function buildCall(baseUrl: string, method: DescMethod, bindings: HttpBinding[], input: Message): HttpCall {
  for (const binding of bindings) {
    const call = tryBinding(baseUrl, method.input, binding, input);
    if (call) return call;
  }
  throw new Error(`${method.parent.typeName}/${method.name}: no REST binding fits the request`);
}

function tryBinding(baseUrl: string, schema: DescMessage, binding: HttpBinding, input: Message): HttpCall | undefined {
  const json = toJson(schema, input) as JsonObject;
  let missing = false;
  const path = binding.path.replace(VARIABLE, (_all, fieldPath: string, template?: string) => {
    const value = fieldValue(schema, input, fieldPath);
    if (value === undefined || value === "") {
      missing = true;
      return "";
    }
    removeJsonPath(schema, json, fieldPath);
    // A multi-segment variable ({name=a/**}) keeps its slashes; one segment is escaped whole.
    const multi = template?.includes("/") || template === "**";
    return multi ? value.split("/").map(encodeURIComponent).join("/") : encodeURIComponent(value);
  });
  if (missing) return undefined;
  let body: string | undefined;
  let rest: JsonObject = json;
  if (binding.body === "*") {
    body = JSON.stringify(json);
    rest = {};
  } else if (binding.body !== "") {
    const field = schema.fields.find((f) => f.name === binding.body);
    const key = field?.jsonName ?? binding.body;
    body = JSON.stringify(json[key] ?? {});
    rest = { ...json };
    delete rest[key];
  }
  const query = new URLSearchParams();
  flatten(rest, "", query);
  const qs = query.toString();
  return { verb: binding.verb, url: joinUrl(baseUrl, path) + (qs ? `?${qs}` : ""), body, binding };
}

function joinUrl(baseUrl: string, path: string): string {
  return baseUrl.replace(/\/+$/, "") + path;
}

/** The string value of a (nested) field named by proto names, as a path variable takes it. */
function fieldValue(schema: DescMessage, input: Message, fieldPath: string): string | undefined {
  let desc: DescMessage | undefined = schema;
  let value: unknown = input;
  for (const name of fieldPath.split(".")) {
    const field: DescField | undefined = desc?.fields.find((f) => f.name === name);
    if (!field || value === undefined || value === null) return undefined;
    value = (value as Record<string, unknown>)[field.localName];
    desc = field.fieldKind === "message" ? field.message : undefined;
  }
  if (value === undefined || value === null || typeof value === "object") return undefined;
  return String(value);
}

function removeJsonPath(schema: DescMessage, json: JsonObject, fieldPath: string): void {
  let desc: DescMessage | undefined = schema;
  let obj: JsonObject | undefined = json;
  const names = fieldPath.split(".");
  names.forEach((name, i) => {
    const field: DescField | undefined = desc?.fields.find((f) => f.name === name);
    if (!field || !obj) return;
    if (i === names.length - 1) delete obj[field.jsonName];
    else {
      const next: JsonValue | undefined = obj[field.jsonName];
      obj = next && typeof next === "object" && !Array.isArray(next) ? next : undefined;
      desc = field.fieldKind === "message" ? field.message : undefined;
    }
  });
}

function flatten(value: JsonValue, prefix: string, out: URLSearchParams): void {
  if (value === null) return;
  if (Array.isArray(value)) {
    for (const item of value) if (item === null || typeof item !== "object") out.append(prefix, String(item));
    return;
  }
  if (typeof value === "object") {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
    return;
  }
  out.append(prefix, String(value));
}
