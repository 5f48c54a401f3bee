import type { IncomingMessage, ServerResponse } from "node:http";
import { Code, httpStatusOf, PlatformError } from "@platform/errors";

/** Reads a body up to `limit` bytes; beyond it, 413 (payload_too_large). */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function tooLarge(limit: number): PlatformError {
  return new PlatformError(
    Code.InvalidArgument,
    "payload_too_large",
    `request body is larger than ${limit} bytes`,
    {},
    { httpStatus: 413 },
  );
}

/** E2B's error body: `{code, message}` with the HTTP status as code (the SDK reads both). */
export function sendError(res: ServerResponse, err: unknown, log?: (err: unknown) => void): void {
  const pe =
    err instanceof PlatformError
      ? err
      : new PlatformError(Code.Internal, "internal", "internal error", {}, { cause: err });
  if (pe.code === Code.Internal) log?.(err);
  const status = pe.httpStatus ?? (pe.reason === "sandbox_not_running" ? 502 : httpStatusOf(pe.code));
  sendJson(res, status, { code: status, message: pe.message });
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

export function headersOf(req: IncomingMessage): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (typeof v === "string") h.set(k, v);
    else if (Array.isArray(v)) for (const x of v) h.append(k, x);
  }
  return h;
}
