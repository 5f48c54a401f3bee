import { now } from "./stats.ts";

export interface SseEvent {
  event: string;
  data: string;
  /** hrtime (ns) of the read that completed this event. */
  at: bigint;
}

/** POSTs and reads a text/event-stream to its end, stamping each event with its arrival time. */
export async function postSse(url: string, token: string, body: unknown): Promise<{ status: number; firstByteAt: bigint; events: SseEvent[] }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body),
  });
  const events: SseEvent[] = [];
  let firstByteAt = 0n;
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    const at = now();
    if (firstByteAt === 0n) firstByteAt = at;
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      events.push({ event, data: data.join("\n"), at });
      end = buffer.indexOf("\n\n");
    }
  }
  return { status: res.status, firstByteAt, events };
}
