import * as http from "node:http";
import * as https from "node:https";
import { ApiError, type PlatformClient } from "./http.ts";

/**
 * One file-chunk call on a connection of its own (no keep-alive): a reused
 * idle connection that the server closes at the moment the next chunk's
 * body starts (its keep-alive timeout, reached on a loaded machine) failed
 * an upload with EPIPE, and a POST that may have been sent cannot be
 * retried blindly. A new TCP connection per 8 MiB call costs nothing
 * measurable. Authentication and errors as PlatformClient does them: the
 * bearer (refreshed once on 401, which the handler never saw), the error
 * envelopes of identity and agents as ApiError.
 */
export async function chunkCall<T>(
  client: PlatformClient,
  method: "GET" | "POST",
  url: string,
  body?: unknown,
): Promise<T> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  // A read is safe to send again when the connection failed (a write is not: it may have landed).
  const attempt = () =>
    send(client.bearer(), method, url, payload).catch(async (err) => {
      if (method !== "GET") throw err;
      await new Promise((r) => setTimeout(r, 1000));
      return send(client.bearer(), method, url, payload);
    });
  let answer = await attempt();
  if (answer.status === 401 && !client.env.PLATFORM_API_KEY && (await client.refresh())) answer = await attempt();
  const text = answer.body.toString("utf8");
  if (answer.status >= 200 && answer.status < 300) return (text ? JSON.parse(text) : undefined) as T;
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
  payload: Buffer | undefined,
): Promise<{ status: number; body: Buffer }> {
  const target = new URL(url);
  const request = target.protocol === "https:" ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method,
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          ...(payload ? { "content-type": "application/json", "content-length": payload.length } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on("error", (err) => reject(unreachable(target, err)));
      },
    );
    req.on("error", (err) => reject(unreachable(target, err)));
    req.end(payload);
  });
}

function unreachable(target: URL, err: Error): ApiError {
  return new ApiError(0, "unreachable", `cannot reach ${target.origin}: ${err.message}`);
}
