import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** What the replay server answers to one request. */
export type Reply =
  /** SSE frames written one by one; `cut` drops the connection after them without ending the stream. */
  { kind: "sse"; frames: string[]; cut?: boolean } | { kind: "status"; status: number; body: unknown };

export type Recorded = { path: string; headers: IncomingHttpHeaders; body: Record<string, unknown> };

/**
 * A local HTTP server that answers each request with the next scripted
 * reply, byte for byte as a provider's streaming API would, and records the
 * requests.
 */
export class ReplayServer {
  readonly requests: Recorded[] = [];
  readonly #replies: Reply[] = [];
  #server?: Server;
  url = "";

  push(...replies: Reply[]): this {
    this.#replies.push(...replies);
    return this;
  }

  async start(): Promise<string> {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", async () => {
        this.requests.push({
          path: req.url ?? "",
          headers: req.headers,
          body: JSON.parse(Buffer.concat(chunks).toString() || "{}"),
        });
        const reply = this.#replies.shift() ?? {
          kind: "status",
          status: 500,
          body: { error: { message: "no reply scripted" } },
        };
        if (reply.kind === "status") {
          res.writeHead(reply.status, { "content-type": "application/json" });
          res.end(JSON.stringify(reply.body));
          return;
        }
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        for (const frame of reply.frames) {
          res.write(frame);
          // Let each frame travel on its own, as a real stream's would.
          await new Promise((resolve) => setImmediate(resolve));
        }
        if (reply.cut) res.socket?.destroy();
        else res.end();
      });
    });
    await new Promise<void>((resolve) => this.#server!.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }
}

/** A URL nothing listens on: a server's port after it closed. */
export async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

/** An SSE frame with an `event:` name (Anthropic style). */
export const named = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
/** A data-only SSE frame (OpenAI style). */
export const dataOnly = (data: unknown) => `data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`;
