import http from "node:http";
import { annotateErrors, keepAliveAgent, stampFrees } from "./socket-reuse.ts";

/**
 * JSON POSTs over keep-alive HTTP/1.1 connections with node:http, for
 * load generation. fetch (undici) spends a few milliseconds of CPU per
 * request here, on the same cores as the service it measures; this costs a
 * fraction of that. Resolves with the status and the whole body.
 */
export class HttpLoadClient {
  readonly #agent: http.Agent;
  readonly #url: URL;

  constructor(baseUrl: string, maxSockets: number) {
    this.#url = new URL(baseUrl);
    this.#agent = keepAliveAgent(maxSockets);
    stampFrees(this.#agent);
  }

  postJson(
    path: string,
    body: unknown,
    headers: http.OutgoingHttpHeaders = {},
  ): Promise<{ status: number; text: string }> {
    return this.request("POST", path, body, headers);
  }

  /** Any method; `body` (when given) is sent as JSON. */
  request(
    method: string,
    path: string,
    body?: unknown,
    headers: http.OutgoingHttpHeaders = {},
  ): Promise<{ status: number; text: string }> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          agent: this.#agent,
          host: this.#url.hostname,
          port: this.#url.port,
          method,
          path,
          headers:
            payload === undefined
              ? headers
              : { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
          res.on("error", reject);
        },
      );
      annotateErrors(req);
      req.on("error", reject);
      req.end(payload);
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}
