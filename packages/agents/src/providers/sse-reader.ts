import { PlatformError } from "@platform/errors";

/** One event of an upstream Server-Sent Events stream. */
export type UpstreamEvent = { event: string; data: string };

/**
 * Parses a `text/event-stream` body (WHATWG rules: LF, CRLF or CR line ends;
 * `data` lines joined by newlines; comments and unknown fields ignored).
 */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<UpstreamEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  const flush = function* () {
    if (data.length > 0) yield { event: event || "message", data: data.join("\n") };
    event = "";
    data = [];
  };
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let match: RegExpExecArray | null;
    // A trailing lone CR may be the first half of CRLF: wait for more bytes.
    while ((match = /\r\n|\n|\r(?!$)/.exec(buffer))) {
      const line = buffer.slice(0, match.index);
      buffer = buffer.slice(match.index + match[0].length);
      if (line === "") {
        yield* flush();
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
  }
  buffer += decoder.decode();
  if (buffer !== "" && !buffer.startsWith(":")) {
    const colon = buffer.indexOf(":");
    if (buffer.slice(0, colon) === "data") data.push(buffer.slice(colon + 1).replace(/^ /, ""));
  }
  yield* flush();
}

/**
 * An upstream event's data as a JSON object, to be read defensively field by
 * field; data that is not JSON is the provider's fault: unavailable, with
 * `malformed` as the message.
 */
// biome-ignore lint/suspicious/noExplicitAny: untyped JSON, read defensively field by field
export function eventJson(data: string, malformed: string): Record<string, any> {
  try {
    return JSON.parse(data);
  } catch {
    throw PlatformError.unavailable(malformed);
  }
}
