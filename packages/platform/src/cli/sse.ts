import { createParser, type EventSourceMessage } from "eventsource-parser";

/** The events of a text/event-stream response body, in order. */
export async function* readSse(res: Response): AsyncGenerator<EventSourceMessage> {
  if (!res.body) return;
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (e) => queue.push(e) });
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    while (queue.length) yield queue.shift()!;
  }
}

/** The runtime router's text chunks carry newlines escaped as `\n`. */
export function unescapeChunk(data: string): string {
  return data.replace(/\\(n|r|\\)/g, (_, c: string) => (c === "n" ? "\n" : c === "r" ? "\r" : "\\"));
}
