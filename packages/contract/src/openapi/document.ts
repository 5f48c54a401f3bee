import type { DescField, DescMethod, DescService } from "@bufbuild/protobuf";
import { type HttpBinding, httpBindingsOf, rawBytesOf, sseOf, successStatusOf, tolerantBodyOf } from "@platform/rpc";
import { getOption, hasOption } from "@bufbuild/protobuf";
import { sse_event } from "@platform/gen/platform/api/v1/options_pb";
import { SseData } from "@platform/gen/platform/api/v1/options_pb";
import { ERROR_SCHEMA, type EnvelopeKind, envelopeSchema } from "./envelopes.ts";
import { type JsonStyle, type Schema, SchemaBuilder } from "./json-schema.ts";
import type { ProtoComments } from "./proto-comments.ts";

/** Who may call an operation, as the service enforces it. */
export interface Access {
  /** No credential needed. */
  public: boolean;
  /** What the credential must be, in words (e.g. "a JWT whose role is owner"). */
  requirement?: string;
  /** The service refuses the call without an `Idempotency-Key` header. */
  idempotencyKey?: boolean;
}

/** One REST service of the platform, as its server is wired. */
export interface Surface {
  /** The file name under gen/openapi/ and the service's name. */
  name: string;
  title: string;
  description: string;
  /** The launcher's default public port (the document's server URL). */
  defaultPort: number;
  /** Every service the REST port serves. */
  services: readonly DescService[];
  /** The JSON options the service gives createServer. */
  style: JsonStyle;
  envelope: EnvelopeKind;
  /** The service refuses unknown request fields (createServer's strictBody). */
  strictBody: boolean;
  access(method: DescMethod): Access;
  /** Error statuses an operation documents beside `default` (the envelope for any other). */
  errors(method: DescMethod, access: Access): number[];
}

/** The routes every public port answers beside the contract's (rpc's dispatch). */
const HEALTH_PATHS = ["/livez", "/healthz", "/readyz"] as const;

const errorStatusText: Record<number, string> = {
  400: "The request is invalid (malformed JSON, a missing or wrong field, a bad path or query parameter).",
  401: "No credential, or one that is not valid.",
  403: "The credential may not do this (role, scope or membership).",
  404: "No such route or resource, or it belongs to another organization.",
  409: "The change conflicts with the current state (a unique slug, the last owner).",
  413: "The request body is larger than the service's limit.",
  415: "The request body is not application/json.",
  429: "Too many attempts: retry after the Retry-After header's seconds.",
  503: "The service cannot take the call now (a dependency is down, a queue is full): retry later.",
};

/** `{a.b=x/*}` → `{a.b}`: OpenAPI's path templates name the variable only. */
function openApiPath(template: string): { path: string; variables: string[] } {
  const variables: string[] = [];
  const path = template.replace(/\{([^}=]+)(=[^}]*)?\}/g, (_, v: string) => {
    variables.push(v);
    return `{${v}}`;
  });
  return { path, variables };
}

// Well-known types a URL value may set (rpc's valueFromString).
const urlMessages = new Set([
  "google.protobuf.Timestamp",
  "google.protobuf.Duration",
  "google.protobuf.FieldMask",
  "google.protobuf.DoubleValue",
  "google.protobuf.FloatValue",
  "google.protobuf.Int64Value",
  "google.protobuf.UInt64Value",
  "google.protobuf.Int32Value",
  "google.protobuf.UInt32Value",
  "google.protobuf.BoolValue",
  "google.protobuf.StringValue",
  "google.protobuf.BytesValue",
]);

function settableFromUrl(field: DescField): boolean {
  if (field.fieldKind === "map") return false;
  if (field.fieldKind === "message") return urlMessages.has(field.message.typeName);
  if (field.fieldKind === "list" && field.listKind === "message") return urlMessages.has(field.message.typeName);
  return true;
}

/** The schema of a URL value of the field: a string form of a request field's JSON. */
function urlSchema(builder: SchemaBuilder, field: DescField): Schema {
  const s = builder.field(field, "request");
  // null is a JSON body's way to say unset; a URL cannot say it.
  const any = s.anyOf as Schema[] | undefined;
  return any && any.length === 2 && (any[1] as Schema).type === "null" ? (any[0] as Schema) : s;
}

function operationId(method: DescMethod, index: number): string {
  const base = `${method.parent.name}_${method.name}`;
  return index === 0 ? base : `${base}_${index + 1}`;
}

/** The SSE events of a stream: each event's name, data and whether the stream ends after it. */
function sseEvents(builder: SchemaBuilder, method: DescMethod): Schema[] {
  const stream = sseOf(method)!;
  const out = method.output;
  if (!stream.oneof) {
    const keep = stream.dataFields.length > 0 ? new Set(stream.dataFields) : undefined;
    const omit = new Set(stream.idField ? [stream.idField] : []);
    const idField = stream.idField ? out.fields.find((f) => f.name === stream.idField) : undefined;
    return [
      {
        event: "message",
        id: idField ? `the message's \`${idField.jsonName}\`` : undefined,
        data:
          stream.data === SseData.ESCAPED_TEXT
            ? { type: "string", contentMediaType: "text/plain" }
            : builder.message(out, "sse", omit, keep),
        terminal: false,
      },
    ];
  }
  const oneof = out.oneofs.find((o) => o.name === stream.oneof)!;
  return oneof.fields.map((f) => {
    const opt = hasOption(f, sse_event) ? getOption(f, sse_event) : undefined;
    let data: Schema;
    if (opt?.data === SseData.ESCAPED_TEXT) {
      data = {
        type: "string",
        contentMediaType: "text/plain",
        description: "Raw text; line breaks written as the two characters `\\n` (and `\\r`).",
      };
    } else if (f.fieldKind === "message") {
      data = builder.message(f.message, "sse");
    } else {
      data = builder.field(f, "sse");
    }
    return { event: opt?.event || "message", variant: f.jsonName, data, terminal: opt?.terminal ?? false };
  });
}

/** A raw_bytes field as the whole body. */
const RAW_CONTENT: Schema = {
  "application/octet-stream": { schema: { type: "string", contentMediaType: "application/octet-stream" } },
};

function jsonContent(schema: Schema): Schema {
  return { "application/json": { schema } };
}

function errorResponse(status: number): Schema {
  return {
    description: errorStatusText[status] ?? "An error.",
    content: jsonContent({ $ref: `#/components/schemas/${ERROR_SCHEMA}` }),
  };
}

/** The shared error responses, referred to by every operation. */
function errorResponses(): Record<string, Schema> {
  const out: Record<string, Schema> = {};
  for (const s of Object.keys(errorStatusText)) out[`Error${s}`] = errorResponse(Number(s));
  out.ErrorDefault = {
    description: "Any other error (500 internal, 501, 504 ...), in the service's error envelope.",
    content: jsonContent({ $ref: `#/components/schemas/${ERROR_SCHEMA}` }),
  };
  return out;
}

function operationOf(
  surface: Surface,
  builder: SchemaBuilder,
  method: DescMethod,
  binding: HttpBinding,
  index: number,
): { path: string; verb: string; operation: Schema } | undefined {
  const stream = sseOf(method);
  // Only unary RPCs and SSE-framed server streams have a REST form (rpc's routes).
  if (method.methodKind !== "unary" && !(method.methodKind === "server_streaming" && stream)) return undefined;
  const input = method.input;
  const { path, variables } = openApiPath(binding.path);
  const access = surface.access(method);
  const parameters: Schema[] = [];
  const pathTop = new Set<string>();
  for (const v of variables) {
    const steps = v.split(".");
    let desc = input;
    let field: DescField | undefined;
    for (const step of steps) {
      field = desc.fields.find((f) => f.name === step || f.jsonName === step);
      if (!field) throw new Error(`${method.parent.typeName}.${method.name}: path variable ${v} is not a field`);
      if (field.fieldKind === "message") desc = field.message;
    }
    if (steps.length === 1) pathTop.add(field!.name);
    const text = builder.comments.get(`${field!.parent.typeName}.${field!.name}`);
    parameters.push({
      name: v,
      in: "path",
      required: true,
      ...(text ? { description: text } : {}),
      schema: urlSchema(builder, field!),
    });
  }
  let requestBody: Schema | undefined;
  const bodyField =
    binding.body && binding.body !== "*" ? input.fields.find((f) => f.name === binding.body) : undefined;
  // raw_bytes: the field may also come as the whole body (application/octet-stream), the others in the query.
  const rawName = rawBytesOf(method);
  const rawIn =
    rawName && binding.body !== "" ? input.fields.find((f) => f.name === rawName || f.jsonName === rawName) : undefined;
  const rawOut = rawName ? method.output.fields.find((f) => f.name === rawName || f.jsonName === rawName) : undefined;
  if (binding.body === "*") {
    // An empty body is read as the empty request (rpc's transcoder), so the
    // body is never required as such: the fields the call needs are checked by it.
    requestBody = {
      required: false,
      ...(tolerantBodyOf(method) ? { description: "Any body is accepted: what cannot be read is ignored." } : {}),
      content: {
        ...jsonContent(builder.message(input, "request", pathTop)),
        ...(rawIn ? RAW_CONTENT : {}),
      },
    };
  } else if (bodyField) {
    requestBody = {
      required: false,
      content: { ...jsonContent(builder.field(bodyField, "request")), ...(rawIn ? RAW_CONTENT : {}) },
    };
  }
  if (rawIn && requestBody) {
    requestBody.description = `An application/octet-stream body is \`${rawIn.jsonName}\` itself, the other fields in the query.`;
  }
  if (binding.body !== "*" || rawIn) {
    for (const f of input.fields) {
      if (pathTop.has(f.name) || f === bodyField || f === rawIn || !settableFromUrl(f)) continue;
      const schema = urlSchema(builder, f);
      const text = [
        binding.body === "*" && "With an application/octet-stream body only.",
        builder.comments.get(`${input.typeName}.${f.name}`),
        f.jsonName !== f.name && `Also accepted as \`${f.name}\`.`,
      ]
        .filter(Boolean)
        .join(" ");
      parameters.push({
        name: f.jsonName,
        in: "query",
        required: false,
        ...(text ? { description: text } : {}),
        schema,
        ...(f.fieldKind === "list" ? { style: "form", explode: true } : {}),
      });
    }
  }
  if (stream?.resumeField) {
    parameters.push({
      name: "Last-Event-ID",
      in: "header",
      required: false,
      description: `Resumes after this event id (sets \`${stream.resumeField}\` unless the query does).`,
      schema: { type: "string" },
    });
  }
  if (access.idempotencyKey) {
    parameters.push({
      name: "Idempotency-Key",
      in: "header",
      required: true,
      description:
        "Deduplicates retries: a replay of the same request within the window returns the stored original answer.",
      schema: { type: "string", minLength: 1 },
    });
  }

  const responses: Record<string, Schema> = {};
  const status = successStatusOf(method);
  if (stream) {
    const events = sseEvents(builder, method);
    responses[String(status)] = {
      description:
        "Server-Sent Events, one per line group; `: ping` comments keep an idle stream open. " +
        `Events: ${events.map((e) => `\`${e.event}\`${e.terminal ? " (terminal)" : ""}`).join(", ")}.`,
      content: { "text/event-stream": { schema: { type: "string" } } },
      "x-sse-events": events,
    };
  } else if (status === 204) {
    responses["204"] = { description: "Done; no body." };
  } else {
    const responseBody = binding.responseBody || binding.rule.responseBody;
    const field = responseBody ? method.output.fields.find((f) => f.name === responseBody) : undefined;
    if (responseBody && !field) throw new Error(`${method.name}: response_body ${responseBody} not in output`);
    let schema = field ? builder.field(field, "response") : builder.message(method.output, "response");
    const any = schema.anyOf as Schema[] | undefined;
    // An unset response_body field is written as its empty value, never null.
    if (field && any && any.length === 2 && (any[1] as Schema).type === "null") schema = any[0] as Schema;
    if (rawOut) {
      // `Accept: application/octet-stream`: the field as the body, each other field a header (rpc's transcoder).
      const headers: Record<string, Schema> = {};
      for (const f of method.output.fields) {
        if (f === rawOut) continue;
        headers[`x-${f.name.replaceAll("_", "-")}`] = {
          description: `With Accept: application/octet-stream: \`${f.jsonName}\`, its JSON value.`,
          schema: { type: "string" },
        };
      }
      responses[String(status)] = {
        description: `OK. With \`Accept: application/octet-stream\`, \`${rawOut.jsonName}\` itself is the body and the other fields are headers.`,
        headers,
        content: { ...jsonContent(schema), ...RAW_CONTENT },
      };
    } else responses[String(status)] = { description: "OK", content: jsonContent(schema) };
  }
  for (const s of surface.errors(method, access)) responses[String(s)] = { $ref: `#/components/responses/Error${s}` };
  responses.default = { $ref: "#/components/responses/ErrorDefault" };

  const operation: Schema = {
    operationId: operationId(method, index),
    tags: [method.parent.name],
    summary: `${method.parent.typeName}.${method.name}`,
    description: [
      builder.comments.get(`${method.parent.typeName}.${method.name}`),
      access.requirement ? `Caller: ${access.requirement}.` : "Caller: anyone; no credential.",
    ]
      .filter(Boolean)
      .join("\n\n"),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(requestBody ? { requestBody } : {}),
    responses,
    security: access.public ? [] : [{ bearer: [] }],
  };
  return { path, verb: binding.verb.toLowerCase(), operation };
}

const healthSchema: Schema = {
  type: "object",
  required: ["status", "service", "version"],
  additionalProperties: false,
  properties: {
    status: { type: "string", enum: ["ok", "ready", "not_ready"] },
    service: { type: "string" },
    version: { type: "string" },
  },
};

function healthOperations(): Record<string, Schema> {
  const paths: Record<string, Schema> = {};
  for (const p of HEALTH_PATHS) {
    const responses: Record<string, Schema> = {
      200: {
        description: "Alive (or, for /readyz, ready).",
        content: jsonContent({ $ref: "#/components/schemas/Health" }),
      },
    };
    if (p === "/readyz") {
      responses["503"] = {
        description: "Not ready (a dependency is down, or the service is shutting down).",
        content: jsonContent({ $ref: "#/components/schemas/Health" }),
      };
    }
    paths[p] = { get: { operationId: `health_${p.slice(1)}`, tags: ["health"], security: [], responses } };
  }
  paths["/openapi.json"] = {
    get: {
      operationId: "openapi_document",
      tags: ["health"],
      description: "This document. Public: it describes the API and holds no secret.",
      security: [],
      responses: { 200: { description: "The OpenAPI 3.1 document.", content: jsonContent({ type: "object" }) } },
    },
  };
  return paths;
}

/** The OpenAPI 3.1 document of one REST service, from its services' descriptors and google.api.http rules. */
export function openApiDocument(surface: Surface, comments: ProtoComments = new Map()): Schema {
  const builder = new SchemaBuilder(surface.style, comments, surface.strictBody);
  const paths: Record<string, Record<string, Schema>> = {};
  for (const service of surface.services) {
    for (const method of service.methods) {
      httpBindingsOf(method).forEach((binding, i) => {
        const op = operationOf(surface, builder, method, binding, i);
        if (!op) return;
        const item = (paths[op.path] ??= {});
        if (item[op.verb]) throw new Error(`${op.verb.toUpperCase()} ${op.path} bound twice`);
        item[op.verb] = op.operation;
      });
    }
  }
  const schemas: Record<string, Schema> = {};
  for (const name of [...builder.components.keys()].sort()) schemas[name] = builder.components.get(name)!;
  schemas[ERROR_SCHEMA] = envelopeSchema(surface.envelope);
  schemas.Health = healthSchema;
  const sortedPaths: Record<string, Schema> = {};
  const all: Record<string, Schema> = { ...paths, ...healthOperations() };
  for (const p of Object.keys(all).sort()) sortedPaths[p] = all[p]!;
  return {
    openapi: "3.1.0",
    info: {
      title: surface.title,
      version: "v1",
      description:
        `${surface.description}\n\nGenerated from proto/ and its google.api.http rules by ` +
        "`pnpm gen` (packages/contract/src/openapi); do not edit.",
    },
    servers: [{ url: `http://127.0.0.1:${surface.defaultPort}`, description: "The launcher's default" }],
    tags: [
      ...surface.services.map((s) => ({
        name: s.name,
        description: comments.get(s.typeName) ?? s.typeName,
      })),
      { name: "health", description: "Liveness, readiness and this document: no credential." },
    ],
    paths: sortedPaths,
    components: {
      schemas,
      responses: errorResponses(),
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description: "An access token (RS256 JWT from /v1/auth/login) or, where allowed, an API key.",
        },
      },
    },
  };
}
