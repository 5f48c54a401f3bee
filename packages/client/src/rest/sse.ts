import {
  create,
  type DescField,
  type DescMessage,
  fromJson,
  getOption,
  hasOption,
  type JsonValue,
  type Message,
  ScalarType,
} from "@bufbuild/protobuf";
import { SseData, type SseStream, sse_event } from "@platform/gen/platform/api/v1/options_pb";
import { Code } from "@platform/errors";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { ClientReason, clientError } from "../errors.ts";

/**
 * The events of a text/event-stream body, in order, read with the stream's
 * reader (every browser and Node 20: no async iteration of ReadableStream,
 * which Safari lacks). A read that fails (the connection dropped) throws
 * UNAVAILABLE `stream_interrupted`; comments (`: ping`) are skipped.
 */
export async function* readSse(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal,
): AsyncGenerator<EventSourceMessage> {
  const reader = body.getReader();
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => queue.push(e) });
  const decoder = new TextDecoder();
  try {
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (signal.aborted) throw err;
        throw clientError(Code.Unavailable, ClientReason.streamInterrupted, "the event stream was interrupted", err);
      }
      if (chunk.done) break;
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      while (queue.length) yield queue.shift()!;
    }
    parser.feed(decoder.decode());
    while (queue.length) yield queue.shift()!;
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** Undoes SSE_DATA_ESCAPED_TEXT: `\n`, `\r` and `\\` back to what they stand for. */
export function unescapeText(data: string): string {
  return data.replace(/\\(n|r|\\)/g, (_, c: string) => (c === "n" ? "\n" : c === "r" ? "\r" : "\\"));
}

/** One decoded event: the message, and whether the contract marks its kind as the stream's last. */
export interface DecodedEvent {
  message: Message;
  terminal: boolean;
}

/**
 * One SSE event as the streamed message, following the method's
 * `(platform.api.v1.sse)` framing: JSON data with the `id:` line put back
 * into `id_field`, or, with `oneof`, the variant its event name picks (JSON
 * or escaped text). An event of a kind the contract does not name yet is
 * skipped (events are additive), so undefined.
 */
export function decodeSseEvent(
  output: DescMessage,
  framing: SseStream,
  ev: EventSourceMessage,
): DecodedEvent | undefined {
  if (!framing.oneof) {
    const message = fromJson(output, parseJson(ev.data), { ignoreUnknownFields: true });
    if (framing.idField && ev.id !== undefined)
      setScalar(
        message,
        output.fields.find((f) => f.name === framing.idField),
        ev.id,
      );
    return { message, terminal: false };
  }
  const oneof = output.oneofs.find((o) => o.name === framing.oneof);
  if (!oneof) return undefined;
  for (const field of oneof.fields) {
    const opt = hasOption(field, sse_event) ? getOption(field, sse_event) : undefined;
    if ((opt?.event ?? "") !== (ev.event ?? "") || field.fieldKind !== "message") continue;
    let value: Message;
    if (opt?.data === SseData.ESCAPED_TEXT) {
      value = create(field.message);
      setScalar(
        value,
        field.message.fields.find((f) => f.name === opt.textField),
        unescapeText(ev.data),
      );
    } else value = fromJson(field.message, parseJson(ev.data), { ignoreUnknownFields: true });
    const message = create(output);
    (message as unknown as Record<string, unknown>)[oneof.localName] = { case: field.localName, value };
    return { message, terminal: opt?.terminal ?? false };
  }
  return undefined;
}

function parseJson(data: string): JsonValue {
  try {
    return JSON.parse(data) as JsonValue;
  } catch (err) {
    throw clientError(Code.Unknown, ClientReason.protocolError, "an event's data is not JSON", err);
  }
}

function setScalar(message: Message, field: DescField | undefined, text: string): void {
  if (field?.fieldKind !== "scalar") return;
  const target = message as unknown as Record<string, unknown>;
  const s = field.scalar;
  const int64 = [ScalarType.INT64, ScalarType.UINT64, ScalarType.FIXED64, ScalarType.SFIXED64, ScalarType.SINT64];
  if (int64.includes(s)) target[field.localName] = /^-?\d+$/.test(text) ? BigInt(text) : 0n;
  else if (s === ScalarType.STRING) target[field.localName] = text;
  else target[field.localName] = Number(text);
}
