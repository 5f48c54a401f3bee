import type { IncomingMessage, ServerResponse } from "node:http";
import { posix } from "node:path";
import { type ComputePort, MAX_FILE_CHUNK_BYTES } from "./compute-port.ts";
import { Code, PlatformError } from "@platform/errors";
import { envdSandbox } from "./envd-access.ts";
import { headersOf, readBody, sendJson } from "./http-util.ts";
import { sandboxPath } from "./paths.ts";
import type { SandboxRecords } from "./records.ts";

/** At most this much per upload request (multipart or octet-stream). */
export const MAX_UPLOAD_BYTES = 64 * 1024 * 1024;
/** At most this much per download: a file is read in compute's 16 MiB chunks and sent whole. */
export const MAX_DOWNLOAD_BYTES = 256 * 1024 * 1024;

/** envd's `GET /files` and `POST /files` (the SDK's files.read and files.write) over compute's ReadFile and WriteFile. */
export async function handleFiles(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  records: SandboxRecords,
  compute: ComputePort,
): Promise<void> {
  const sb = envdSandbox(records, headersOf(req));
  const path = url.searchParams.get("path") ?? "";
  if (req.method === "GET") {
    if (!path) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "path is required");
    const abs = sandboxPath(path);
    const chunks: Uint8Array[] = [];
    let offset = 0;
    for (;;) {
      const r = await compute.readFile(sb.sandboxId, abs, offset, MAX_FILE_CHUNK_BYTES);
      if (r.totalSize > MAX_DOWNLOAD_BYTES)
        throw new PlatformError(
          Code.InvalidArgument,
          "payload_too_large",
          `file is larger than ${MAX_DOWNLOAD_BYTES} bytes`,
        );
      chunks.push(r.data);
      offset += r.data.length;
      if (r.eof || r.data.length === 0) break;
    }
    const body = Buffer.concat(chunks);
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": body.length });
    res.end(body);
    return;
  }
  if (req.method !== "POST")
    throw new PlatformError(Code.Unimplemented, "unimplemented", "method not allowed on /files");
  const body = await readBody(req, MAX_UPLOAD_BYTES);
  const type = req.headers["content-type"] ?? "";
  const files: { path: string; data: Uint8Array }[] = [];
  if (type.startsWith("multipart/form-data")) {
    const form = await new Request("http://files.invalid/", {
      method: "POST",
      headers: { "content-type": type },
      body,
    }).formData();
    for (const part of form.getAll("file")) {
      if (typeof part === "string") continue;
      const target = path || part.name;
      if (!target) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "a file part without a path");
      files.push({ path: target, data: new Uint8Array(await part.arrayBuffer()) });
    }
  } else {
    if (req.headers["content-encoding"])
      throw new PlatformError(
        Code.Unimplemented,
        "unimplemented",
        "compressed uploads are not served by this platform",
      );
    if (!path) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "path is required");
    files.push({ path, data: body });
  }
  if (files.length === 0) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "no file in the request");
  const written = [];
  for (const f of files) {
    const abs = sandboxPath(f.path);
    let at = 0;
    do {
      const piece = f.data.subarray(at, at + MAX_FILE_CHUNK_BYTES);
      await compute.writeFile(sb.sandboxId, abs, piece, at > 0);
      at += piece.length;
    } while (at < f.data.length);
    written.push({ name: posix.basename(abs), type: "file", path: abs });
  }
  sendJson(res, 200, written);
}
