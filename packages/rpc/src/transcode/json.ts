import {
  type DescField,
  type DescMessage,
  fromJson,
  type JsonObject,
  type JsonValue,
  type Message,
  ScalarType,
  toJson,
} from "@bufbuild/protobuf";
import { isWrapperDesc } from "@bufbuild/protobuf/wkt";

/** A value that cannot be bound to its field: the caller answers 400. */
export class BindError extends Error {
  override name = "BindError";
}

/** Finds a field by proto name or JSON name. */
export function findField(desc: DescMessage, name: string): DescField | undefined {
  return desc.fields.find((f) => f.name === name || f.jsonName === name);
}

/**
 * Resolves a dotted field path; every step but the last must be a singular,
 * non-well-known message field.
 */
export function resolveFieldPath(desc: DescMessage, path: string[]): DescField[] {
  const out: DescField[] = [];
  let cur: DescMessage | undefined = desc;
  for (let k = 0; k < path.length; k++) {
    const f: DescField | undefined = cur ? findField(cur, path[k]!) : undefined;
    if (!f) throw new BindError(`unknown field "${path.slice(0, k + 1).join(".")}"`);
    out.push(f);
    if (k < path.length - 1) {
      if (f.fieldKind !== "message" || f.message.file.name.startsWith("google/protobuf/")) {
        throw new BindError(`field "${path.slice(0, k + 1).join(".")}" has no sub-fields`);
      }
      cur = f.message;
    }
  }
  return out;
}

const int32Re = /^-?\d+$/;
const uintRe = /^\d+$/;

function scalarFromString(scalar: ScalarType, s: string, what: string): JsonValue {
  const bad = (): never => {
    throw new BindError(`invalid value for ${what}: ${JSON.stringify(s)}`);
  };
  switch (scalar) {
    case ScalarType.STRING:
      return s;
    case ScalarType.BYTES:
      if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(s)) bad();
      return s;
    case ScalarType.BOOL: {
      const l = s.toLowerCase();
      if (l === "true" || s === "1") return true;
      if (l === "false" || s === "0") return false;
      return bad();
    }
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32: {
      if (!int32Re.test(s)) bad();
      const n = Number(s);
      if (n < -2147483648 || n > 2147483647) bad();
      return n;
    }
    case ScalarType.UINT32:
    case ScalarType.FIXED32: {
      if (!uintRe.test(s)) bad();
      const n = Number(s);
      if (n > 4294967295) bad();
      return n;
    }
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64: {
      if (!int32Re.test(s)) bad();
      const n = BigInt(s);
      if (n < -(2n ** 63n) || n >= 2n ** 63n) bad();
      return n.toString();
    }
    case ScalarType.UINT64:
    case ScalarType.FIXED64: {
      if (!uintRe.test(s)) bad();
      const n = BigInt(s);
      if (n >= 2n ** 64n) bad();
      return n.toString();
    }
    case ScalarType.FLOAT:
    case ScalarType.DOUBLE: {
      if (s === "NaN" || s === "Infinity" || s === "-Infinity") return s;
      if (s.trim() === "") bad();
      const n = Number(s);
      if (!Number.isFinite(n)) bad();
      return n;
    }
  }
  return bad();
}

// Well-known types whose JSON form is a string that fromJson validates.
const stringWkts = new Set(["google.protobuf.Timestamp", "google.protobuf.Duration", "google.protobuf.FieldMask"]);

function singleFromString(
  kind: { scalar?: ScalarType; enum?: DescField["enum"]; message?: DescMessage },
  s: string,
  what: string,
): JsonValue {
  if (kind.scalar !== undefined) return scalarFromString(kind.scalar, s, what);
  if (kind.enum) {
    if (kind.enum.values.some((v) => v.name === s)) return s;
    if (int32Re.test(s)) {
      const n = Number(s);
      if (kind.enum.values.some((v) => v.number === n)) return n;
    }
    throw new BindError(`invalid value for ${what}: ${JSON.stringify(s)}`);
  }
  const m = kind.message!;
  if (isWrapperDesc(m)) return scalarFromString(m.fields[0]!.scalar!, s, what);
  if (stringWkts.has(m.typeName)) return s;
  throw new BindError(`${what} is a message and cannot be set from a string`);
}

/** Converts one path or query string to the JSON value of its field. */
export function valueFromString(field: DescField, s: string, what: string): JsonValue {
  switch (field.fieldKind) {
    case "scalar":
      return singleFromString({ scalar: field.scalar }, s, what);
    case "enum":
      return singleFromString({ enum: field.enum }, s, what);
    case "message":
      return singleFromString({ message: field.message }, s, what);
    case "list":
      return singleFromString({ scalar: field.scalar, enum: field.enum, message: field.message }, s, what);
    case "map":
      throw new BindError(`${what} is a map and cannot be set from the URL`);
  }
}

/**
 * Sets `value` at the field path inside a JSON object, replacing whatever
 * the body had there under either name of the field.
 */
export function setJsonPath(root: JsonObject, fields: DescField[], value: JsonValue, append = false): void {
  let obj = root;
  for (let k = 0; k < fields.length; k++) {
    const f = fields[k]!;
    const existing = obj[f.jsonName] ?? obj[f.name];
    if (f.name !== f.jsonName) delete obj[f.name];
    if (k === fields.length - 1) {
      if (append) {
        const arr = Array.isArray(existing) ? existing : [];
        arr.push(value);
        obj[f.jsonName] = arr;
      } else obj[f.jsonName] = value;
      return;
    }
    const next: JsonObject =
      existing !== null && typeof existing === "object" && !Array.isArray(existing) ? { ...existing } : {};
    obj[f.jsonName] = next;
    obj = next;
  }
}

export interface OutputJsonOptions {
  /** Write zero and empty fields too (proto3 JSON omits them by default). */
  alwaysEmitImplicit?: boolean;
  /** Keep proto3 JSON's string form of 64-bit integers instead of numbers. */
  int64AsString?: boolean;
  /**
   * Write `null` for unset singular message fields (timestamps included) and
   * unset proto3 `optional` fields, where a contract shows "X or null"
   * instead of leaving the key out.
   */
  emitNulls?: boolean;
}

/**
 * proto3 JSON of a message, with 64-bit integers written as JSON numbers when
 * they are exactly representable (the platform's contract shows `expires_in`
 * and `tokensIn` as numbers; proto3 JSON would quote them).
 */
export function messageToJson(desc: DescMessage, msg: Message, opts: OutputJsonOptions = {}): JsonValue {
  // Large top-level bytes fields (file data) are encoded by Node's base64,
  // not protobuf-es's JavaScript one: measured 15 s against 0.5 s for 16 MiB.
  const large = largeBytesFields(desc, msg);
  const copy = large.length > 0 ? ({ ...msg } as Record<string, unknown>) : undefined;
  for (const f of large) copy![f.localName] = new Uint8Array(0);
  const json = toJson(desc, (copy ?? msg) as Message, { alwaysEmitImplicit: opts.alwaysEmitImplicit ?? false });
  for (const f of large) {
    const bytes = (msg as unknown as Record<string, Uint8Array>)[f.localName]!;
    // A view, not a copy, of the field's bytes.
    (json as Record<string, JsonValue>)[f.jsonName] = Buffer.from(
      bytes.buffer,
      bytes.byteOffset,
      bytes.byteLength,
    ).toString("base64");
  }
  if (large.length > 0) base64Written.set(json as JsonObject, new Set(large.map((f) => f.jsonName)));
  if (!opts.int64AsString) unquoteInt64(desc, json);
  if (opts.emitNulls) fillNulls(desc, json);
  return json;
}

/** The keys whose values messageToJson wrote with Node's base64, by the object holding them (for jsonBody). */
const base64Written = new WeakMap<JsonObject, Set<string>>();

/**
 * JSON.stringify(json) as UTF-8: the same bytes, but the long base64
 * strings messageToJson wrote at the top level (file data) are copied in as
 * they are. JSON.stringify scanned an 11 MiB string for characters to escape
 * and the UTF-8 length and encoding scanned it twice more, ~40 ms a file
 * chunk; base64 has nothing to escape. The members are written in the
 * order JSON.stringify takes them (Object.entries'), undefined ones left out.
 */
export function jsonBody(json: JsonValue): Buffer {
  const keys = json !== null && typeof json === "object" && !Array.isArray(json) ? base64Written.get(json) : undefined;
  if (!keys) return Buffer.from(JSON.stringify(json));
  const pieces: Array<[string, BufferEncoding]> = [];
  let text = "{";
  let sep = "";
  for (const [k, v] of Object.entries(json as JsonObject)) {
    if (v === undefined) continue;
    text += `${sep}${JSON.stringify(k)}:`;
    sep = ",";
    if (typeof v === "string" && keys.has(k)) {
      pieces.push([`${text}"`, "utf8"], [v, "latin1"]);
      text = '"';
    } else text += JSON.stringify(v);
  }
  pieces.push([`${text}}`, "utf8"]);
  const body = Buffer.allocUnsafe(pieces.reduce((n, [str, enc]) => n + Buffer.byteLength(str, enc), 0));
  let at = 0;
  for (const [str, enc] of pieces) at += body.write(str, at, enc);
  return body;
}

function fillNulls(desc: DescMessage, json: JsonValue): void {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return;
  if (desc.file.name.startsWith("google/protobuf/")) return;
  for (const f of desc.fields) {
    if (f.oneof && !f.proto.proto3Optional) continue;
    const v = json[f.jsonName];
    if (f.fieldKind === "message") {
      if (v === undefined) json[f.jsonName] = null;
      else fillNulls(f.message, v);
    } else if (f.fieldKind === "scalar" || f.fieldKind === "enum") {
      if (v === undefined && f.proto.proto3Optional) json[f.jsonName] = null;
    } else if (f.fieldKind === "list" && f.listKind === "message" && Array.isArray(v)) {
      for (const e of v) fillNulls(f.message, e);
    }
  }
}

/** The 64-bit integer scalars (JSON strings in proto3 JSON; numbers in our output when safe). */
export const int64Scalars = new Set([
  ScalarType.INT64,
  ScalarType.UINT64,
  ScalarType.SINT64,
  ScalarType.FIXED64,
  ScalarType.SFIXED64,
]);

function toNumber(v: JsonValue): JsonValue {
  if (typeof v !== "string") return v;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
}

function unquoteInt64(desc: DescMessage, json: JsonValue): void {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return;
  if (desc.file.name.startsWith("google/protobuf/")) return;
  for (const f of desc.fields) {
    const v = json[f.jsonName];
    if (v === undefined) continue;
    switch (f.fieldKind) {
      case "scalar":
        if (int64Scalars.has(f.scalar)) json[f.jsonName] = toNumber(v);
        break;
      case "list":
        if (!Array.isArray(v)) break;
        if (f.listKind === "scalar" && int64Scalars.has(f.scalar)) json[f.jsonName] = v.map(toNumber);
        else if (f.listKind === "message") for (const e of v) unquoteInt64(f.message, e);
        break;
      case "map":
        if (v === null || typeof v !== "object" || Array.isArray(v)) break;
        for (const [k, e] of Object.entries(v)) {
          if (f.mapKind === "scalar" && int64Scalars.has(f.scalar)) v[k] = toNumber(e);
          else if (f.mapKind === "message") unquoteInt64(f.message, e);
        }
        break;
      case "message":
        unquoteInt64(f.message, v);
        break;
    }
  }
}

/** The empty JSON value of a field named by response_body when it is unset. */
export function emptyJsonOf(field: DescField): JsonValue {
  if (field.fieldKind === "list") return [];
  if (field.fieldKind === "map" || field.fieldKind === "message") return {};
  if (field.fieldKind === "enum") return field.enum.values[0]?.name ?? 0;
  switch (field.scalar) {
    case ScalarType.STRING:
    case ScalarType.BYTES:
      return "";
    case ScalarType.BOOL:
      return false;
    default:
      return 0;
  }
}

/** Bytes fields above this size take Node's base64 path (a few KiB: below it either way costs nothing). */
const LARGE_BYTES = 4096;

function largeBytesFields(desc: DescMessage, msg: Message): DescField[] {
  const out: DescField[] = [];
  for (const f of desc.fields) {
    if (f.fieldKind !== "scalar" || f.scalar !== ScalarType.BYTES || f.oneof) continue;
    const v = (msg as unknown as Record<string, unknown>)[f.localName];
    if (v instanceof Uint8Array && v.length > LARGE_BYTES) out.push(f);
  }
  return out;
}

const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * Node decoded every character of `v`: it skips characters outside the
 * alphabet and stops at a "=" inside, and either gives fewer bytes than the
 * length promises, except with a remainder of 1 (then BASE64 decides). So a
 * whole decode is valid base64 without BASE64's scan of the string (~10 ms
 * for 11 MiB); anything else is judged by BASE64 as before.
 */
function decodedWhole(v: string, bytes: Buffer): boolean {
  const n = v.length - (v.endsWith("==") ? 2 : v.endsWith("=") ? 1 : 0);
  return n % 4 !== 1 && bytes.length === Math.floor((n * 3) / 4);
}

/**
 * fromJson with long base64 strings of top-level bytes fields decoded by
 * Node (protobuf-es's decoder took 1.7 s for 16 MiB, Node's a few ms); the
 * same alphabet (standard or URL-safe, padding optional) is accepted, and
 * anything else is the same error fromJson gives.
 */
export function requestFromJson(
  desc: DescMessage,
  json: JsonValue,
  options: { ignoreUnknownFields: boolean },
  cut?: CutBytes,
): Message {
  const taken: Array<[DescField, Uint8Array]> = cut ? [[cut.field, cut.bytes]] : [];
  if (json !== null && typeof json === "object" && !Array.isArray(json)) {
    for (const f of desc.fields) {
      if (f.fieldKind !== "scalar" || f.scalar !== ScalarType.BYTES || f.oneof) continue;
      for (const key of new Set([f.jsonName, f.name])) {
        const v = json[key];
        if (typeof v !== "string" || v.length <= LARGE_BYTES) continue;
        const bytes = v.length % 4 === 1 ? undefined : Buffer.from(v, "base64");
        if (!bytes || (!decodedWhole(v, bytes) && !BASE64.test(v)))
          throw new Error(`cannot decode field ${desc.typeName}.${f.name} from JSON: invalid base64 string`);
        // A view of Node's buffer, not a copy.
        taken.push([f, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)]);
        delete json[key];
      }
    }
  }
  const msg = fromJson(desc, json, options) as Message;
  for (const [f, bytes] of taken) (msg as unknown as Record<string, unknown>)[f.localName] = bytes;
  return msg;
}

/** A bytes field's value that parseBody took out of the text, decoded. */
export interface CutBytes {
  field: DescField;
  bytes: Uint8Array;
}

/**
 * JSON.parse of a request body that is an object, with the long base64
 * string of a top-level bytes field (file data) taken out of the text first
 * and decoded from the bytes as they are: UTF-8 decoding and JSON.parse of
 * an 11 MiB string cost ~25 ms a file chunk. The field is then "" in the
 * parsed object and its bytes are in `cut` (requestFromJson puts them in).
 * Only where the result is exactly what parsing the whole text gives: the
 * body opens with "{" and holds no other object or array before the key (so
 * the key is one of the top level's own), nothing from the string on holds
 * a backslash (no escapes, no spelled-out key), the key does not come again,
 * the rest parses with the field "" at the top level, and the string is
 * valid base64 (else the whole text is parsed and judged as before).
 */
export function parseBody(desc: DescMessage, body: Buffer): { json: JsonValue; cut?: CutBytes } {
  const cut = body[0] === 0x7b ? cutBytes(desc, body) : undefined;
  return cut ?? { json: JSON.parse(body.toString("utf8")) };
}

function cutBytes(desc: DescMessage, body: Buffer): { json: JsonObject; cut: CutBytes } | undefined {
  for (const field of desc.fields) {
    if (field.fieldKind !== "scalar" || field.scalar !== ScalarType.BYTES || field.oneof) continue;
    if (field.name !== field.jsonName) continue;
    const key = body.indexOf(`"${field.name}":"`);
    if (key < 0) continue;
    const start = key + field.name.length + 4;
    const end = body.indexOf(0x22, start);
    if (end - start <= LARGE_BYTES) return undefined;
    const before = body.subarray(1, key);
    if (before.includes(0x7b) || before.includes(0x5b) || body.includes(0x5c, start)) return undefined;
    if (body.includes(`"${field.name}"`, end)) return undefined;
    const text = body.toString("latin1", start, end);
    if (text.length % 4 === 1) return undefined;
    const bytes = Buffer.from(text, "base64");
    if (!decodedWhole(text, bytes)) return undefined;
    let json: JsonValue;
    try {
      json = JSON.parse(body.toString("utf8", 0, start) + body.toString("utf8", end));
    } catch {
      return undefined;
    }
    if (json === null || typeof json !== "object" || Array.isArray(json) || json[field.jsonName] !== "")
      return undefined;
    return { json, cut: { field, bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) } };
  }
  return undefined;
}
