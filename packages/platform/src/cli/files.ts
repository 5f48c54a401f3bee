import { createHash } from "node:crypto";
import { createWriteStream, renameSync, rmSync, statSync, type WriteStream } from "node:fs";
import { open } from "node:fs/promises";
import { basename, posix } from "node:path";
import { finished } from "node:stream/promises";
import { ApiError } from "./http.ts";
import { chunkCall } from "./chunk-call.ts";
import type { Context, Flags } from "./commands.ts";
import { UsageError } from "./endpoints.ts";
import { Progress } from "./progress.ts";

/**
 * Data per call: 16 MiB, the specification's ceiling. Each call has costs
 * of its own in every process (a connection, the bearer's check, the
 * session's and agent's rows, the gRPC call, opening the file): against
 * 8 MiB calls, a 256 MiB upload took ~18 % less CPU across the CLI and the
 * services (9.1 s against 11.1-11.4 s), a download ~5 % less.
 */
export const CHUNK_BYTES = 16 * 1024 * 1024;

type FileEntry = { path: string; size?: number | string; isDir?: boolean; mode?: number; modifiedAt?: string | null };

const filesUrl = (ctx: Context, session: string, verb = "") =>
  `${ctx.client().endpoints.agents}/v1/sessions/${encodeURIComponent(session)}/files${verb}`;

/** `platform files ls <session> [path] [--recursive]`. */
export async function filesList(ctx: Context, args: string[], flags: Flags): Promise<void> {
  const [session, path = ""] = args as [string, string?];
  const query = new URLSearchParams({ path });
  if (flags.recursive) query.set("recursive", "true");
  const res = await ctx
    .client()
    .request<{ items: FileEntry[]; truncated: boolean }>("GET", `${filesUrl(ctx, session)}?${query}`);
  if (ctx.io.json) {
    ctx.io.value({ items: res.items, truncated: res.truncated });
    return;
  }
  if (res.items.length === 0) ctx.io.err("no files");
  for (const e of res.items) {
    const kind = e.isDir ? "d" : "-";
    const mode = (e.mode ?? 0).toString(8).padStart(4, "0");
    ctx.io.line(
      `${kind} ${mode} ${String(e.size ?? 0).padStart(12)} ${(e.modifiedAt ?? "").slice(0, 19).padEnd(19)} ${e.path}${e.isDir ? "/" : ""}`,
    );
  }
  if (res.truncated) ctx.io.err("(more entries than listed)");
}

/**
 * `platform files upload <session> <local> [remote]`: the file is read in
 * chunks of CHUNK_BYTES and sent one call each (the first truncates, the
 * next append), never whole in memory. `remote` defaults to the file's name
 * in the workspace root; a remote ending in "/" is a directory to put it in.
 */
export async function filesUpload(ctx: Context, args: string[]): Promise<void> {
  const [session, local, remoteArg] = args as [string, string, string?];
  let size: number;
  let mode: number;
  try {
    const st = statSync(local);
    if (!st.isFile()) throw new UsageError(`${local} is not a file`);
    size = st.size;
    mode = st.mode & 0o777;
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`cannot read ${local}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const remote = !remoteArg
    ? basename(local)
    : remoteArg.endsWith("/")
      ? posix.join(remoteArg, basename(local))
      : remoteArg;
  const client = ctx.client();
  const url = filesUrl(ctx, session, ":write");
  // The chunk is the body as read (the route's raw form), the other fields in the query.
  const write = (chunk: Buffer, append: boolean) =>
    chunkCall(
      client,
      "POST",
      `${url}?${new URLSearchParams({ path: remote, append: String(append), mode: String(mode) })}`,
      { body: chunk, contentType: OCTET_STREAM },
    );
  const hash = createHash("sha256");
  const progress = Progress.maybe(`upload ${basename(local)}`, size, ctx.io.json);
  const started = Date.now();
  let sent = 0;
  let calls = 0;
  // The next chunk is read and hashed while the call before it is in
  // flight; the calls themselves go one at a time, in order. Two buffers
  // in turn: a chunk is read into the one whose call has ended (a fresh
  // 16 MiB buffer a chunk cost the kernel's page faults each time).
  const buffers = [Buffer.allocUnsafeSlow(CHUNK_BYTES), Buffer.allocUnsafeSlow(CHUNK_BYTES)];
  let inFlight: Promise<void> | undefined;
  const file = await open(local, "r");
  try {
    for (;;) {
      const buffer = buffers[calls % 2] as Buffer;
      let filled = 0;
      while (filled < CHUNK_BYTES) {
        const { bytesRead } = await file.read(buffer, filled, CHUNK_BYTES - filled, null);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      if (filled === 0 && calls > 0) break;
      const chunk = buffer.subarray(0, filled);
      hash.update(chunk);
      await inFlight;
      // The first call truncates (and makes an empty file still), the next ones append.
      inFlight = write(chunk, calls > 0).then(() => {
        sent += chunk.length;
        progress?.add(chunk.length);
      });
      inFlight.catch(() => {}); // awaited before the next call or after the loop
      calls++;
      if (filled < CHUNK_BYTES) break;
    }
    await inFlight;
  } finally {
    await file.close();
  }
  progress?.end();
  report(ctx, "uploaded", {
    session,
    local,
    remote,
    bytes: sent,
    sha256: hash.digest("hex"),
    seconds: (Date.now() - started) / 1000,
  });
}

const OCTET_STREAM = "application/octet-stream";

/**
 * Read calls in flight at once while downloading: the reads are independent,
 * the writes stay in order. Two of CHUNK_BYTES: 32 MiB in flight, as four
 * 8 MiB calls held before, so the services hold no more of a download at once.
 */
export const DOWNLOAD_PARALLEL = 2;

type ReadAnswer = { data: Buffer[]; length: number; totalSize: number; eof: boolean };

/**
 * `platform files download <session> <remote> [local]`: read in calls of
 * CHUNK_BYTES by offset. The first call gives the size; then up to
 * DOWNLOAD_PARALLEL calls are in flight at once, each chunk written out in
 * order, so at most that many chunks are held. A file that grows meanwhile
 * is read on to its end, one that shrinks ends at its end. The file is written as `<local>.part` and renamed when
 * complete, so an interrupted download never looks whole; `-` writes to stdout.
 */
export async function filesDownload(ctx: Context, args: string[]): Promise<void> {
  const [session, remote, localArg] = args as [string, string, string?];
  const toStdout = localArg === "-";
  const local = localArg && !toStdout ? localArg : basename(remote);
  if (toStdout && ctx.io.json)
    throw new UsageError("--json and - (stdout) cannot be combined: stdout carries the file");
  const client = ctx.client();
  const url = filesUrl(ctx, session, ":read");
  // The data comes as the body (the route's raw form), the size and end in headers.
  const read = async (offset: number): Promise<ReadAnswer> => {
    const query = new URLSearchParams({ path: remote, offset: String(offset), maxBytes: String(CHUNK_BYTES) });
    const { headers, chunks, length } = await chunkCall(client, "GET", `${url}?${query}`, { accept: OCTET_STREAM });
    // Anything else (JSON from a service that ignored Accept) would be written into the file as data.
    if (headers["content-type"] !== OCTET_STREAM)
      throw new ApiError(0, "unexpected_answer", `files:read answered ${headers["content-type"] ?? "no type"}`);
    return { data: chunks, length, totalSize: Number(headers["x-total-size"] ?? 0), eof: headers["x-eof"] === "true" };
  };
  const part = `${local}.part`;
  // Made once the first answer is in: a download refused outright leaves no file behind.
  let file: WriteStream | undefined;
  const hash = createHash("sha256");
  const started = Date.now();
  let offset = 0;
  let progress: Progress | undefined;
  const inFlight = new Map<number, Promise<ReadAnswer>>();
  try {
    const first = await read(0);
    if (!toStdout) file = createWriteStream(part);
    const out = file ?? process.stdout;
    const total = first.totalSize;
    progress = Progress.maybe(`download ${basename(remote)}`, total, ctx.io.json);
    let next = CHUNK_BYTES;
    const refill = () => {
      while (inFlight.size < DOWNLOAD_PARALLEL && next < total) {
        const p = read(next);
        p.catch(() => {}); // awaited in order below; a failure ends the download there
        inFlight.set(next, p);
        next += CHUNK_BYTES;
      }
    };
    let answer: ReadAnswer | undefined = first;
    while (answer) {
      if (!first.eof) refill();
      let drained = true;
      for (const piece of answer.data) {
        hash.update(piece);
        drained = out.write(piece);
      }
      const length = answer.length;
      offset += length;
      progress?.add(length);
      if (!drained) await new Promise<void>((resolve) => out.once("drain", () => resolve()));
      // A file that shrank under us ends the download too (no data, not at eof). A short chunk that is not
      // the end goes on from where it stopped (the reads in flight at later multiples then go unused).
      if (answer.eof || length === 0) break;
      const pending = inFlight.get(offset);
      inFlight.delete(offset);
      answer = pending ? await pending : await read(offset);
    }
    if (file) {
      file.end();
      await finished(file);
      renameSync(part, local);
    }
  } catch (err) {
    if (file) {
      // Removed once closed: a stream destroyed before its open completes still creates the file.
      file.destroy();
      await finished(file).catch(() => {});
      rmSync(part, { force: true });
    }
    throw err;
  }
  progress?.end();
  if (toStdout) return;
  report(ctx, "downloaded", {
    session,
    remote,
    local,
    bytes: offset,
    sha256: hash.digest("hex"),
    seconds: (Date.now() - started) / 1000,
  });
}

function report(
  ctx: Context,
  what: string,
  r: { bytes: number; sha256: string; seconds: number; local: string; remote: string; session: string },
): void {
  if (ctx.io.json) {
    ctx.io.value(r);
    return;
  }
  const rate = r.seconds > 0 ? ` (${(r.bytes / (1024 * 1024) / r.seconds).toFixed(1)} MiB/s)` : "";
  ctx.io.line(
    `${what} ${r.bytes} bytes${rate} ${what === "uploaded" ? `${r.local} → ${r.remote}` : `${r.remote} → ${r.local}`}  sha256 ${r.sha256}`,
  );
}
