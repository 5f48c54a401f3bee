import {
  create,
  type DescField,
  type DescMessage,
  getOption,
  hasOption,
  type Message,
  ScalarType,
} from "@bufbuild/protobuf";
import { SseData, type SseEvent, type SseStream, sse_event } from "@platform/gen/platform/api/v1/options_pb";
import { int64Scalars, messageToJson, type OutputJsonOptions } from "./json.ts";

/** One SSE event ready to write, and whether the stream ends after it. */
export interface SseFrame {
  text: string;
  terminal: boolean;
}

/** Escapes line breaks so one text chunk stays one `data:` line. */
export function escapeText(s: string): string {
  return s.replace(/\r\n|\r|\n/g, (m) => (m === "\r" ? "\\r" : m === "\n" ? "\\n" : "\\r\\n"));
}

function get(msg: Message, field: DescField): unknown {
  return (msg as unknown as Record<string, unknown>)[field.localName];
}

/**
 * Frames streamed messages as SSE events according to the method's
 * `(platform.api.v1.sse)` option and, with `oneof`, the variants'
 * `(platform.api.v1.sse_event)` options.
 */
export class SseFramer {
  private readonly idField?: DescField;
  /** JSON names kept in the data object; undefined keeps all. */
  private readonly dataFields?: Set<string>;
  private readonly oneof?: DescMessage["oneofs"][number];
  private readonly variants = new Map<string, { field: DescField; opt: SseEvent | undefined }>();
  private readonly json: OutputJsonOptions;
  /** Writes the data object straight from the message, when every data field allows it (see compileData). */
  private readonly fastData?: (msg: Message) => string;

  constructor(
    private readonly desc: DescMessage,
    opt: SseStream,
    json: OutputJsonOptions = {},
  ) {
    // SSE payloads always omit zero and empty fields (the contract says so).
    this.json = { ...json, alwaysEmitImplicit: false };
    if (opt.idField) {
      this.idField = desc.fields.find((f) => f.name === opt.idField);
      if (!this.idField) throw new Error(`sse id_field "${opt.idField}" not in ${desc.typeName}`);
    }
    if (opt.dataFields.length > 0) {
      this.dataFields = new Set(
        opt.dataFields.map((name) => {
          const field = desc.fields.find((f) => f.name === name);
          if (!field) throw new Error(`sse data_fields "${name}" not in ${desc.typeName}`);
          return field.jsonName;
        }),
      );
    }
    if (!opt.oneof) this.fastData = compileData(desc, this.idField, this.dataFields, this.json);
    if (opt.oneof) {
      this.oneof = desc.oneofs.find((o) => o.name === opt.oneof);
      if (!this.oneof) throw new Error(`sse oneof "${opt.oneof}" not in ${desc.typeName}`);
      for (const f of this.oneof.fields) {
        this.variants.set(f.localName, {
          field: f,
          opt: hasOption(f, sse_event) ? getOption(f, sse_event) : undefined,
        });
      }
    }
  }

  /** The variant whose event is named `error`, if the contract has one. */
  errorVariant(): DescField | undefined {
    for (const { field, opt } of this.variants.values()) if (opt?.event === "error") return field;
    return undefined;
  }

  /**
   * A message carrying `text` in the contract's error variant (its first
   * string field), or undefined when the contract defines no error event.
   */
  errorMessage(text: string): Message | undefined {
    const variant = this.errorVariant();
    if (!variant || !this.oneof) return undefined;
    let value: unknown = text;
    if (variant.fieldKind === "message") {
      const str = variant.message.fields.find((f) => f.fieldKind === "scalar" && f.scalar === 9);
      value = create(variant.message, str ? { [str.localName]: text } : {});
    }
    return create(this.desc, { [this.oneof.localName]: { case: variant.localName, value } } as never);
  }

  frame(msg: Message): SseFrame | undefined {
    let head = "";
    if (this.idField) {
      const id = get(msg, this.idField);
      if (id !== undefined && id !== "" && id !== 0 && id !== 0n) head += `id: ${String(id).replace(/[\r\n]/g, "")}\n`;
    }
    if (this.fastData) return { text: `${head}data: ${this.fastData(msg)}\n\n`, terminal: false };
    if (!this.oneof) {
      const json = messageToJson(this.desc, msg, this.json) as Record<string, unknown>;
      if (this.idField) delete json[this.idField.jsonName];
      if (this.dataFields) for (const key of Object.keys(json)) if (!this.dataFields.has(key)) delete json[key];
      return { text: `${head}data: ${JSON.stringify(json)}\n\n`, terminal: false };
    }
    const sel = (msg as unknown as Record<string, { case?: string; value?: unknown }>)[this.oneof.localName];
    if (!sel?.case) return undefined;
    const variant = this.variants.get(sel.case);
    if (!variant) return undefined;
    const { field, opt } = variant;
    if (opt?.event) head += `event: ${opt.event.replace(/[\r\n]/g, "")}\n`;
    let data: string;
    if (opt?.data === SseData.ESCAPED_TEXT) {
      let text = sel.value;
      if (field.fieldKind === "message") {
        const tf = field.message.fields.find((f) => f.name === opt.textField) ?? field.message.fields[0];
        text = tf ? get(sel.value as Message, tf) : "";
      }
      data = escapeText(String(text ?? ""));
    } else if (field.fieldKind === "message") {
      data = JSON.stringify(messageToJson(field.message, sel.value as Message, this.json));
    } else {
      data = JSON.stringify(sel.value);
    }
    return { text: `${head}data: ${data}\n\n`, terminal: opt?.terminal ?? false };
  }
}

/** 32-bit integer scalars (protobuf-es: number, zero `0`); the 64-bit ones are json.ts's. */
const int32Scalars = new Set([
  ScalarType.INT32,
  ScalarType.UINT32,
  ScalarType.SINT32,
  ScalarType.FIXED32,
  ScalarType.SFIXED32,
]);

/**
 * The data object of a frame without a oneof, written straight from the
 * message: the same text as JSON.stringify of messageToJson's object with the
 * id field and the fields outside data_fields deleted (members in field-number
 * order, zero values left out, int64 as a number when it is a safe integer
 * unless int64AsString), without building that object. Under the agents
 * mixed-load figure the general path cost ~9 % of the process's CPU: the
 * whole message converted (a Timestamp formatted only to be deleted), every
 * int64 re-read, keys deleted (a dictionary-mode object for JSON.stringify).
 * Only implicit-presence string, bool and integer fields qualify; any other
 * data field (messages, lists, maps, enums, bytes, floats, optional fields)
 * keeps the general path, whose output this must equal (sse.test.ts pins it).
 */
function compileData(
  desc: DescMessage,
  idField: DescField | undefined,
  dataFields: Set<string> | undefined,
  json: OutputJsonOptions,
): ((msg: Message) => string) | undefined {
  const fields = desc.fields
    .filter((f) => f !== idField && (!dataFields || dataFields.has(f.jsonName)))
    .sort((a, b) => a.number - b.number);
  type Writer = (value: unknown) => string | undefined;
  const writers: Array<{ local: string; key: string; write: Writer }> = [];
  for (const f of fields) {
    if (f.fieldKind !== "scalar" || f.oneof || f.proto.proto3Optional || f.presence !== 2 /* IMPLICIT */) return;
    if (f.jsonName === "__proto__" || f.localName === "__proto__") return;
    let write: Writer;
    if (f.scalar === ScalarType.STRING) write = (v) => (v === "" ? undefined : JSON.stringify(v));
    else if (f.scalar === ScalarType.BOOL) write = (v) => (v === false ? undefined : JSON.stringify(v));
    else if (int32Scalars.has(f.scalar)) write = (v) => (v === 0 ? undefined : JSON.stringify(v));
    else if (int64Scalars.has(f.scalar) && !f.longAsString) {
      write = (v) => {
        if (typeof v !== "bigint") throw new Error(`sse: ${f.name} is not a bigint`);
        if (v === 0n) return undefined;
        const s = v.toString();
        return json.int64AsString || !Number.isSafeInteger(Number(s)) ? `"${s}"` : s;
      };
    } else return;
    writers.push({ local: f.localName, key: `${JSON.stringify(f.jsonName)}:`, write });
  }
  return (msg) => {
    const record = msg as unknown as Record<string, unknown>;
    let out = "{";
    for (const w of writers) {
      const v = w.write(record[w.local]);
      if (v === undefined) continue;
      out += out.length === 1 ? w.key + v : `,${w.key}${v}`;
    }
    return `${out}}`;
  };
}
