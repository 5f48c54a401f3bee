import * as http from "node:http";
import * as https from "node:https";
import { ApiError, type PlatformClient } from "./http.ts";

/** What a chunk call sends: the body as it is, its type, and the type the answer should come in. */
export type ChunkRequest = { body?: Buffer; contentType?: string; accept?: string };

/**
 * A successful answer: its headers (names in lower case) and body, as the
 * pieces it came in (joining 16 MiB into a fresh buffer cost page faults
 * and a copy, for data that is only hashed and written out).
 */
export type ChunkAnswer = { headers: http.IncomingHttpHeaders; chunks: Buffer[]; length: number };

/**
 * One file-chunk call on a connection of its own (no keep-alive): a reused
 * idle connection that the server closes at the moment the next chunk's
 * body starts (its keep-alive timeout, reached on a loaded machine) failed
 * an upload with EPIPE, and a POST that may have been sent cannot be
 * retried blindly. A new TCP connection per 16 MiB call costs nothing
 * measurable. Authentication and errors as PlatformClient does them: the
 * bearer (refreshed once on 401, which the handler never saw), the error
 * envelopes of identity and agents as ApiError. The file data travels as
 * raw bytes (application/octet-stream both ways, the routes' raw_bytes):
 * as base64 in JSON it cost every side a copy and a parse of 21 MiB of
 * text per call.
 */
export async function chunkCall(
  client: PlatformClient,
  method: "GET" | "POST",
  url: string,
  request: ChunkRequest = {},
): Promise<ChunkAnswer> {
  // A read is safe to send again when the connection failed (a write is not: it may have landed).
  const attempt = () =>
    send(client.bearer(), method, url, request).catch(async (err) => {
      if (method !== "GET") throw err;
      await new Promise((r) => setTimeout(r, 1000));
      return send(client.bearer(), method, url, request);
    });
  let answer = await attempt();
  if (answer.status === 401 && !client.env.PLATFORM_API_KEY && (await client.refresh())) answer = await attempt();
  if (answer.status >= 200 && answer.status < 300) return answer;
  const text = Buffer.concat(answer.chunks).toString("utf8");
  try {
    const e = JSON.parse(text) as { code?: string; message?: string; error?: { code?: string; message?: string } };
    throw new ApiError(
      answer.status,
      e.error?.code ?? e.code ?? `http_${answer.status}`,
      e.error?.message ?? e.message ?? `HTTP ${answer.status}`,
    );
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError(answer.status, `http_${answer.status}`, text.slice(0, 200) || `HTTP ${answer.status}`);
  }
}

function send(
  token: string,
  method: string,
  url: string,
  request: ChunkRequest,
): Promise<ChunkAnswer & { status: number }> {
  const target = new URL(url);
  const agentRequest = target.protocol === "https:" ? https.request : http.request;
  const { body, contentType, accept } = request;
  return new Promise((resolve, reject) => {
    const req = agentRequest(
      target,
      {
        method,
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          ...(accept ? { accept } : {}),
          ...(body ? { "content-type": contentType ?? "application/json", "content-length": body.length } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let length = 0;
        res.on("data", (c: Buffer) => {
          chunks.push(c);
          length += c.length;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, chunks, length }));
        res.on("error", (err) => reject(unreachable(target, err)));
      },
    );
    req.on("error", (err) => reject(unreachable(target, err)));
    req.end(body);
  });
}

function unreachable(target: URL, err: Error): ApiError {
  return new ApiError(0, "unreachable", `cannot reach ${target.origin}: ${err.message}`);
}
