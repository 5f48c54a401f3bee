// Test implementations of the rpctest.v1 services and a server factory the
// package's tests share.
import { createHash } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Code, EdgeCode, IdentityRestCode, PlatformError } from "@platform/errors";
import {
  type ChatResponse,
  ChatResponseSchema,
  DoneSchema,
  type FinishResponse,
  FinishResponseSchema,
  LibraryService,
  StreamService,
  TextChunkSchema,
  UsageSchema,
} from "@platform/gen/rpctest/v1/rpctest_pb";
import { pino } from "pino";
import { requestInfo } from "../context.ts";
import { reasonEnvelope } from "../envelope.ts";
import { createServer, type ServerOptions } from "../server/create-server.ts";
import { openStream } from "../calls/open-stream.ts";

export interface Probe {
  /** Set when a handler's AbortSignal fired. */
  aborted: Set<string>;
  /** Resolves the next time a handler sees its signal abort. */
  nextAbort(): Promise<string>;
  calls: Map<string, number>;
  /** What Finish's handler waits for after its last message, when set (its teardown, held by the test). */
  teardown?: Promise<void>;
}

const waiters = new WeakMap<Probe, ((s: string) => void)[]>();

/** What the test services saw: calls per method and the aborts of cancelled streams, awaitable. */
export function createProbe(): Probe {
  const probe: Probe = {
    aborted: new Set(),
    calls: new Map(),
    nextAbort: () => new Promise((r) => waiters.get(probe)!.push(r)),
  };
  waiters.set(probe, []);
  return probe;
}

function fire(p: Probe, what: string) {
  p.aborted.add(what);
  for (const w of waiters.get(p)!.splice(0)) w(what);
}

function count(p: Probe, what: string) {
  p.calls.set(what, (p.calls.get(what) ?? 0) + 1);
}

const codeByName = new Map(
  Object.entries(Code)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [k.replace(/([a-z])([A-Z])/g, "$1_$2").toLowerCase(), v as Code]),
);

/** The rpctest LibraryService: REST-mapped unary methods that echo, fail with a requested code, or sleep until aborted. */
export function libraryImpl(probe: Probe): ServiceImpl<typeof LibraryService> {
  return {
    getShelf(req) {
      count(probe, "getShelf");
      if (req.shelf === 404n) throw PlatformError.notFound("shelf not found", "shelf_missing");
      return { shelf: req.shelf, name: `shelf ${req.shelf}` };
    },
    listBooks(req) {
      return { request: req };
    },
    getBook(req) {
      return { book: { name: req.name, title: "T", pages: 10n } };
    },
    createBook(req, ctx) {
      ctx.responseHeader.set("Idempotent-Replayed", "false");
      ctx.responseTrailer.set("x-trailer", "t");
      return { shelf: req.shelf, book: req.book };
    },
    updateBook(req) {
      return { book: req.book, updateMask: req.updateMask };
    },
    deleteBook() {
      return {};
    },
    getFile(req) {
      return { path: req.path };
    },
    cancelOperation(req) {
      return { name: req.name };
    },
    echo(req, ctx) {
      const headers: Record<string, string> = {};
      for (const h of ["authorization", "idempotency-key", "x-request-id", "x-trace-id", "x-custom"]) {
        const v = ctx.requestHeader.get(h);
        if (v !== null) headers[h] = v;
      }
      return { text: req.text.repeat(Math.max(1, req.repeat)), headers, requestId: requestInfo(ctx)?.requestId ?? "" };
    },
    fail(req) {
      // No Retry-After of its own for "unavailable": every UNAVAILABLE gets
      // one from toConnectError (the default 5 s), which tests check.
      if (req.code === "") {
        throw new Error("connect ECONNREFUSED postgres://admin:hunter2@db/select * from users");
      }
      const code = codeByName.get(req.code);
      if (code === undefined) throw new Error(`bad code ${req.code}`);
      throw new PlatformError(code, req.reason || req.code, req.message, req.extra, {
        httpStatus: req.httpStatus || undefined,
      });
    },
    async sleep(req, ctx) {
      count(probe, "sleep");
      try {
        await sleep(Number(req.ms), undefined, { signal: ctx.signal });
        return { aborted: false };
      } catch {
        fire(probe, "sleep");
        throw PlatformError.deadlineExceeded("sleep interrupted");
      }
    },
    listTags(req) {
      return { tags: req.tags };
    },
    putBlob(req) {
      const { name, data, append, mode } = req;
      return { name, size: BigInt(data.length), sha256: createHash("sha256").update(data).digest("hex"), append, mode };
    },
    getBlob(req) {
      if (req.size < 0n) throw PlatformError.invalidArgument("size must be 0 or more");
      const data = Buffer.allocUnsafe(Number(req.size));
      for (let i = 0; i < data.length; i++) data[i] = i % 251;
      return { data, totalSize: req.size * 2n, eof: req.size === 0n, label: `blob ${req.name} é\n` };
    },
  };
}

/** The rpctest StreamService: server streams (Tick, Chat) that can wait, fail first or midway, and record aborts. */
export function streamImpl(probe: Probe): ServiceImpl<typeof StreamService> {
  return {
    async *tick(req, ctx) {
      ctx.signal.addEventListener("abort", () => fire(probe, "tick"));
      try {
        if (req.openFirst) openStream(ctx);
        if (req.waitFirst)
          await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
        if (req.failFirst) ctx.responseHeader.set("Retry-After", "7");
        if (req.failFirst) throw PlatformError.notFound("no such stream", "stream_missing");
        let seq = req.after;
        for (let i = 0; i < req.count || req.hang; i++) {
          if (req.failAfter > 0 && i === req.failAfter) throw PlatformError.unavailable("provider went away");
          seq++;
          // A handler may still answer after its cancel (compute's exec reports `completed`): the waitFirst case.
          yield { seq, text: `tick ${seq}`, tokens: seq * 1000n, last: i === req.count - 1 };
          if (req.intervalMs > 0) await sleep(req.intervalMs, undefined, { signal: ctx.signal }).catch(() => {});
          if (ctx.signal.aborted) return;
        }
      } finally {
        // What a handler holds (a sandbox, a span) is let go here: tests check it is reached.
        count(probe, "tick ended");
      }
    },
    async *chat(req) {
      const ev = (e: ChatResponse["event"]) => create(ChatResponseSchema, { event: e });
      for (const c of req.chunks) yield ev({ case: "text", value: create(TextChunkSchema, { content: c }) });
      if (req.fail) {
        if (req.fail === "crash") throw new Error("secret stack detail");
        throw PlatformError.unavailable(req.fail);
      }
      yield ev({ case: "usage", value: create(UsageSchema, { tokensIn: 3n }) });
      yield ev({ case: "done", value: create(DoneSchema) });
      yield ev({ case: "text", value: create(TextChunkSchema, { content: "after terminal" }) });
    },
    async *finish(req, ctx) {
      const ev = (e: FinishResponse["event"]) => create(FinishResponseSchema, { event: e });
      try {
        for (const c of req.chunks) yield ev({ case: "text", value: create(TextChunkSchema, { content: c }) });
        yield ev({ case: "done", value: create(DoneSchema) });
        await probe.teardown;
        if (req.extraAfter) yield ev({ case: "text", value: create(TextChunkSchema, { content: "after done" }) });
        if (req.failAfter) throw PlatformError.unavailable(req.failAfter);
      } finally {
        // Its teardown sees no cancel: the client had its status, it did not go away.
        if (ctx.signal.aborted) fire(probe, "finish");
        count(probe, "finish ended");
      }
    },
  };
}

/**
 * A reason envelope with identity's names (identity registers the real one,
 * packages/identity/src/server/rest-envelope.ts): what these tests check of
 * `reasonEnvelope` is that a service's table decides every code it shows.
 */
export const identityLikeEnvelope = reasonEnvelope("identity", {
  defaults: {
    invalid_argument: IdentityRestCode.invalidRequest,
    failed_precondition: IdentityRestCode.invalidRequest,
    out_of_range: IdentityRestCode.invalidRequest,
    unauthenticated: IdentityRestCode.unauthenticated,
    permission_denied: IdentityRestCode.insufficientRole,
    not_found: IdentityRestCode.resourceNotFound,
    internal: IdentityRestCode.internal,
    unknown: IdentityRestCode.internal,
  },
  faults: {
    not_found: IdentityRestCode.resourceNotFound,
    method_not_allowed: IdentityRestCode.methodNotAllowed,
    payload_too_large: IdentityRestCode.payloadTooLarge,
    unsupported_media_type: IdentityRestCode.unsupportedMediaType,
    origin_not_allowed: EdgeCode.originNotAllowed,
    invalid_request: IdentityRestCode.invalidRequest,
  },
  internal: IdentityRestCode.internal,
});

/** createServer with both test services (agents' envelope unless overridden) and its probe, for in-process request tests. */
export function testServer(overrides: Partial<ServerOptions> = {}, probe = createProbe()) {
  const server = createServer({
    name: "rpctest",
    envelope: "agents",
    services: [
      { service: LibraryService, impl: libraryImpl(probe) },
      { service: StreamService, impl: streamImpl(probe) },
    ],
    logger: pino({ level: process.env.RPC_TEST_LOG ?? "silent" }),
    ...overrides,
  });
  return { server, probe };
}
