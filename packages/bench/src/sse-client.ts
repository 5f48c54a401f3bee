import * as http from "node:http";
import { annotateErrors, stampFrees } from "./socket-reuse.ts";
import { now } from "./stats.ts";

export interface SseEvent {
  event: string;
  data: string;
  /** hrtime (ns) of the read that completed this event. */
  at: bigint;
}

/**
 * POSTs and reads a text/event-stream to its end, stamping each event with its
 * arrival time. node:http rather than fetch: each chunk is stamped in the
 * socket's data callback, not after a web stream's reader hands it on, so
 * the client adds as little as it can to what it measures.
 */
export function postSse(
  url: string,
  token: string,
  body: unknown,
): Promise<{ status: number; firstByteAt: bigint; events: SseEvent[] }> {
  return readSse("POST", url, token, body);
}

/** `method` (GET for a follow, POST with a JSON body for a send) and the stream to its end. */
export function readSse(
  method: string,
  url: string,
  token: string,
  body?: unknown,
  agent?: http.Agent,
  headers: http.OutgoingHttpHeaders = {},
): Promise<{ status: number; firstByteAt: bigint; events: SseEvent[] }> {
  if (agent) stampFrees(agent);
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      url,
      {
        method,
        agent,
        headers: {
          ...headers,
          authorization: `Bearer ${token}`,
          accept: "text/event-stream",
          ...(payload === undefined
            ? {}
            : { "content-type": "application/json", "content-length": Buffer.byteLength(payload) }),
        },
      },
      (res) => {
        const events: SseEvent[] = [];
        let firstByteAt = 0n;
        let buffer = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          const at = now();
          if (firstByteAt === 0n) firstByteAt = at;
          buffer += chunk;
          let end = buffer.indexOf("\n\n");
          while (end >= 0) {
            const event = parseEvent(buffer.slice(0, end), at);
            if (event) events.push(event);
            buffer = buffer.slice(end + 2);
            end = buffer.indexOf("\n\n");
          }
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, firstByteAt, events }));
        res.on("error", reject);
      },
    );
    annotateErrors(req);
    req.on("error", reject);
    req.end(payload);
  });
}

/**
 * A block without a data line (the server's `: ping` keep-alive comment) is no
 * event (as EventSource has it): undefined. Taken for one, a ping between a
 * run's `done` and the stream's end made the mixed-load figure count a
 * completed send as failed.
 */
function parseEvent(block: string, at: bigint): SseEvent | undefined {
  let event = "message";
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (data.length === 0) return undefined;
  return { event, data: data.join("\n"), at };
}
