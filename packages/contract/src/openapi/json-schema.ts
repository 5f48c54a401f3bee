import { type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import type { ProtoComments } from "./proto-comments.ts";

/** A JSON Schema (2020-12, OpenAPI 3.1's dialect) as plain JSON. */
export type Schema = { [key: string]: unknown };

/**
 * How a service writes its JSON (rpc's OutputJsonOptions, as the service
 * passes them to createServer): what a response always holds follows from it.
 */
export interface JsonStyle {
  alwaysEmitImplicit?: boolean;
  emitNulls?: boolean;
}

/**
 * Which side of the wire a schema describes. Requests are read by proto3
 * JSON's parser (either field name, numbers or strings for 64-bit integers,
 * null for unset); responses are what the service writes with its style.
 * `sse` is the data of one SSE event: zero and empty fields always omitted.
 */
export type Side = "request" | "response" | "sse";

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });

// The platform writes 64-bit integers as JSON numbers when they are exactly
// representable and as proto3 JSON's decimal string otherwise (rpc's
// messageToJson); a request may send either.
const int64: Schema = { type: ["integer", "string"], format: "int64", pattern: "^-?[0-9]+$" };
const uint64: Schema = { type: ["integer", "string"], format: "uint64", minimum: 0, pattern: "^[0-9]+$" };

function scalarSchema(scalar: ScalarType): Schema {
  switch (scalar) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "uint32", minimum: 0, maximum: 4294967295 };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { ...int64 };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { ...uint64 };
    case ScalarType.FLOAT:
    case ScalarType.DOUBLE:
      // proto3 JSON writes the non-finite values as strings.
      return { anyOf: [{ type: "number" }, { type: "string", enum: ["NaN", "Infinity", "-Infinity"] }] };
  }
}

/** proto3 JSON's fixed forms of the well-known types; undefined for any other message. */
function wellKnown(desc: DescMessage): Schema | undefined {
  switch (desc.typeName) {
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time", description: "RFC 3339, UTC (`Z`)." };
    case "google.protobuf.Duration":
      return { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$", description: "Seconds with an `s` suffix." };
    case "google.protobuf.FieldMask":
      return { type: "string", description: "Comma-separated lowerCamelCase field paths." };
    case "google.protobuf.Struct":
      return { type: "object", additionalProperties: true };
    case "google.protobuf.Value":
      return {};
    case "google.protobuf.ListValue":
      return { type: "array", items: {} };
    case "google.protobuf.Empty":
      return { type: "object", additionalProperties: false };
    case "google.protobuf.Any":
      return { type: "object", required: ["@type"], properties: { "@type": { type: "string" } } };
    case "google.protobuf.DoubleValue":
    case "google.protobuf.FloatValue":
      return scalarSchema(ScalarType.DOUBLE);
    case "google.protobuf.Int64Value":
      return { ...int64 };
    case "google.protobuf.UInt64Value":
      return { ...uint64 };
    case "google.protobuf.Int32Value":
      return scalarSchema(ScalarType.INT32);
    case "google.protobuf.UInt32Value":
      return scalarSchema(ScalarType.UINT32);
    case "google.protobuf.BoolValue":
      return { type: "boolean" };
    case "google.protobuf.StringValue":
      return { type: "string" };
    case "google.protobuf.BytesValue":
      return scalarSchema(ScalarType.BYTES);
  }
  return undefined;
}

function enumSchema(field: DescField): Schema {
  const e = field.enum!;
  return { type: "string", enum: e.values.map((v) => v.name), title: e.typeName };
}

const orNull = (s: Schema): Schema => ({ anyOf: [s, { type: "null" }] });

/** Whether proto3 JSON may leave the field out or write null for it: explicit presence. */
function hasPresence(field: DescField): boolean {
  return field.fieldKind === "message" || field.proto.proto3Optional === true;
}

function inRealOneof(field: DescField): boolean {
  return field.oneof !== undefined && !field.proto.proto3Optional;
}

/**
 * Builds the components of one document: each message once per side it is
 * seen on, named by its full proto name (`agents.v1.Agent`), the request
 * side's with `.Request`-free names only when the message is never a
 * response too.
 */
export class SchemaBuilder {
  readonly components = new Map<string, Schema>();
  readonly #sides = new Map<string, Side>();

  readonly #sseStyle: JsonStyle;

  constructor(
    private readonly style: JsonStyle,
    readonly comments: ProtoComments = new Map(),
    /** The service refuses unknown request fields (400). */
    private readonly strictRequests = false,
  ) {
    // SSE payloads always omit zero and empty fields (rpc's SseFramer).
    this.#sseStyle = { ...style, alwaysEmitImplicit: false };
  }

  /** The schema with the proto comment of the field (or message) named, if it has one. */
  described(s: Schema, name: string): Schema {
    const text = this.comments.get(name);
    if (!text) return s;
    return { ...s, description: s.description ? `${text}\n\n${s.description as string}` : text };
  }

  /** The schema of a message on a side: a $ref to its component (built on first use). */
  message(desc: DescMessage, side: Side, omit: ReadonlySet<string> = new Set(), keep?: ReadonlySet<string>): Schema {
    const wkt = wellKnown(desc);
    if (wkt) return wkt;
    const suffix = side === "sse" ? ".SseData" : omit.size > 0 ? ".Body" : "";
    const name = `${desc.typeName}${suffix}`;
    const seen = this.#sides.get(name);
    if (seen !== undefined && seen !== side) {
      // One component cannot say both what a request may leave out and what
      // a response always holds; no message of the contract is both yet.
      throw new Error(`${desc.typeName} is used as a ${seen} and as a ${side}: give the sides their own names`);
    }
    if (seen === undefined) {
      this.#sides.set(name, side);
      this.components.set(name, {}); // placeholder: recursion stops here
      this.components.set(name, this.#object(desc, side, omit, keep));
    }
    return ref(name);
  }

  #object(desc: DescMessage, side: Side, omit: ReadonlySet<string>, keep?: ReadonlySet<string>): Schema {
    const style = this.#styleOf(side);
    const properties: Record<string, Schema> = {};
    const required: string[] = [];
    for (const field of desc.fields) {
      if (omit.has(field.name)) continue;
      if (keep && !keep.has(field.name)) continue;
      properties[field.jsonName] = this.described(this.field(field, side), `${desc.typeName}.${field.name}`);
      if (side !== "request" && alwaysWritten(field, style)) required.push(field.jsonName);
    }
    const schema: Schema = this.described({ type: "object", title: desc.typeName }, desc.typeName);
    schema.properties = properties;
    if (required.length > 0) schema.required = required;
    // Responses are described exactly; a request may hold unknown fields
    // only where the service ignores them (not identity's: strictBody).
    if (side !== "request" || this.strictRequests) schema.additionalProperties = false;
    const oneofs = desc.oneofs.filter((o) => !o.fields.every((f) => f.proto.proto3Optional));
    if (oneofs.length > 0) {
      // At most one variant of each oneof is set.
      schema.allOf = oneofs.map((o) => ({
        not: { anyOf: pairs(o.fields.map((f) => f.jsonName)).map(([a, b]) => ({ required: [a, b] })) },
      }));
      if (oneofs.every((o) => o.fields.length < 2)) delete schema.allOf;
    }
    return schema;
  }

  #styleOf(side: Side): JsonStyle {
    return side === "sse" ? this.#sseStyle : side === "response" ? this.style : {};
  }

  /** The schema of one field's JSON value. */
  field(field: DescField, side: Side): Schema {
    const style = this.#styleOf(side);
    // Nested messages are written with the same options as their parent.
    const nested = side;
    let s: Schema;
    switch (field.fieldKind) {
      case "scalar":
        s = scalarSchema(field.scalar);
        break;
      case "enum":
        s = enumSchema(field);
        break;
      case "message":
        s = this.message(field.message, nested);
        break;
      case "list":
        s = {
          type: "array",
          items:
            field.listKind === "scalar"
              ? scalarSchema(field.scalar)
              : field.listKind === "enum"
                ? enumSchema(field)
                : this.message(field.message, nested),
        };
        break;
      case "map":
        s = {
          type: "object",
          additionalProperties:
            field.mapKind === "scalar"
              ? scalarSchema(field.scalar)
              : field.mapKind === "enum"
                ? enumSchema(field)
                : this.message(field.message, nested),
        };
        break;
    }
    // A request may send null for any field with presence (unset); a
    // response says null where the service's style writes it.
    const nullable = hasPresence(field) && !inRealOneof(field) && (side === "request" || style.emitNulls);
    return nullable ? orNull(s) : s;
  }
}

/** Whether a response written in `style` always holds the field (null included). */
function alwaysWritten(field: DescField, style: JsonStyle): boolean {
  if (inRealOneof(field)) return false;
  if (hasPresence(field)) return style.emitNulls === true;
  return style.alwaysEmitImplicit === true;
}

function pairs<T>(xs: T[]): Array<[T, T]> {
  const out: Array<[T, T]> = [];
  for (let i = 0; i < xs.length; i++) for (let j = i + 1; j < xs.length; j++) out.push([xs[i]!, xs[j]!]);
  return out;
}
