import * as http from "node:http";
import * as https from "node:https";
import { ApiError, type PlatformClient } from "./http.ts";

/**
 * One file-chunk call on a connection of its own (no keep-alive): a reused
 * idle connection that the server closes at the moment the next chunk's
 * body starts (its keep-alive timeout, reached on a loaded machine) failed
 * an upload with EPIPE, and a POST that may have been sent cannot be
 * retried blindly. A new TCP connection per 16 MiB call costs nothing
 * measurable. Authentication and errors as PlatformClient does them: the
 * bearer (refreshed once on 401, which the handler never saw), the error
 * envelopes of identity and agents as ApiError. `body` is sent as JSON, a
 * Buffer as it is (a body built already). A long `data` string in the
 * answer (a read's file data, base64) comes back decoded, as a Buffer.
 */
export async function chunkCall<T>(
  client: PlatformClient,
  method: "GET" | "POST",
  url: string,
  body?: unknown,
): Promise<T> {
  const payload = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  // A read is safe to send again when the connection failed (a write is not: it may have landed).
  const attempt = () =>
    send(client.bearer(), method, url, payload).catch(async (err) => {
      if (method !== "GET") throw err;
      await new Promise((r) => setTimeout(r, 1000));
      return send(client.bearer(), method, url, payload);
    });
  let answer = await attempt();
  if (answer.status === 401 && !client.env.PLATFORM_API_KEY && (await client.refresh())) answer = await attempt();
  if (answer.status >= 200 && answer.status < 300) return (spliceData(answer.body) ?? parseText(answer.body)) as T;
  const text = answer.body.toString("utf8");
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

const parseText = (body: Buffer): unknown => (body.length > 0 ? JSON.parse(body.toString("utf8")) : undefined);

const DATA = Buffer.from('"data":"');
/** Below this the whole answer goes through JSON.parse: cutting it out would gain nothing. */
const SPLICE_MIN = 4096;

/**
 * The answer with its `data` string cut out of the text before JSON.parse
 * and decoded from the bytes as they are (JSON.parse of an 11 MiB string,
 * its UTF-8 decoding and then base64's took ~50 ms a chunk). Only where that
 * is exactly what JSON.parse would give: the answer is an object with no
 * object or array before the key (so `"data":` is one of its own keys),
 * the string holds no backslash (no escapes) and no later `"data"` key could
 * replace it; then the text without the string parses with `data` as "".
 * Anything else: undefined, and the answer is parsed whole.
 */
export function spliceData(body: Buffer): Record<string, unknown> | undefined {
  if (body[0] !== 0x7b) return undefined;
  const key = body.indexOf(DATA);
  if (key < 0) return undefined;
  const start = key + DATA.length;
  const end = body.indexOf(0x22, start);
  if (end - start < SPLICE_MIN) return undefined;
  const head = body.subarray(1, key);
  if (head.includes(0x7b) || head.includes(0x5b) || body.includes(0x5c, start) || body.includes('"data"', end))
    return undefined;
  let rest: unknown;
  try {
    rest = JSON.parse(body.toString("utf8", 0, start) + body.toString("utf8", end));
  } catch {
    return undefined;
  }
  if (rest === null || typeof rest !== "object" || (rest as Record<string, unknown>).data !== "") return undefined;
  (rest as Record<string, unknown>).data = Buffer.from(body.toString("latin1", start, end), "base64");
  return rest as Record<string, unknown>;
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
