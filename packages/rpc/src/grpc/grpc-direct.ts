import type * as http2 from "node:http2";
import {
  type DescMethodServerStreaming,
  type DescMethodUnary,
  type DescService,
  fromBinary,
  type Message,
} from "@bufbuild/protobuf";
import { Code, ConnectError, type ContextValues } from "@connectrpc/connect";
import { contentTypeProto, parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { Logger } from "pino";
import { type DirectTransport, sentHeaders } from "../calls/direct-transport.ts";
import { type IsLast, lastMessageOf } from "../calls/last-message.ts";
import { oneMessage } from "../calls/one-message.ts";
import { whenOpened } from "../calls/open-stream.ts";
import { requestLimitOf } from "../calls/request-limit.ts";
import { boundConnectError } from "../error-bounds.ts";
import {
  CallAbort,
  drained,
  eventOrClose,
  headerOf,
  isGone,
  LazyRequestHeaders,
  type NodeResponse,
} from "../http/node-io.ts";
import type { ShutdownHooks } from "../http/shutdown-hooks.ts";
import { EnvelopeAssembler } from "./envelope-assembler.ts";
import { encodeEnveloped } from "./spliced-encoding.ts";

/** What a Headers object is made from. */
type HeadersInit = ConstructorParameters<typeof Headers>[0];

export interface GrpcDirectOptions {
  services: DescService[];
  /** The direct transport: the implementations with the router's interceptors. */
  transport: DirectTransport;
  /** A call's context values, as the transport would make them, for the request `res` answers. */
  contextValues: (res: NodeResponse) => ContextValues;
  bodyLimitBytes: number;
  /** Deadline of calls that bring none; 0: none. */
  requestTimeoutMs: number;
  shutdown: ShutdownHooks;
  /**
   * The server's count of requests in flight: a stream answered at its
   * declared last message (last_message) stays counted until its handler's
   * teardown is over, so a shutdown waits for it.
   */
  inflight?: { begin(): void; end(): void };
  /** Where the failure of a handler after its stream's last message goes (the status is sent by then). */
  logger?: (values: ContextValues) => Logger;
}

type DirectMethod = DescMethodUnary | DescMethodServerStreaming;

/**
 * Plain gRPC unary and server-streaming calls (binary, uncompressed, over
 * HTTP/2), answered without Connect's universal handler: one unary call
 * through it cost ~0.3 ms of CPU here (async-iterable pipelines, three
 * linked AbortSignals and an AbortError with a stack per call), which
 * bounded VerifyToken and VerifyAPIKey, and a stream waited for `drain`
 * after every message, which bounded exec output (packages/bench/ANALYSIS.md).
 * Everything else (JSON or compressed messages, client and bidi streams,
 * gRPC-Web, Connect) goes through Connect. The implementation, interceptors,
 * deadline, status trailers and error details are the same either way.
 */
export function createGrpcDirect(o: GrpcDirectOptions) {
  const byPath = new Map<string, DirectMethod>();
  const lastOf = new Map<DirectMethod, IsLast>();
  for (const service of o.services) {
    for (const method of service.methods) {
      if (method.methodKind === "unary" || method.methodKind === "server_streaming") {
        byPath.set(`/${service.typeName}/${method.name}`, method as DirectMethod);
      }
      const isLast = lastMessageOf(method);
      if (isLast) lastOf.set(method as DirectMethod, isLast);
    }
  }

  /**
   * The method of a request (its verb, path and headers) this path serves,
   * if it is one: asked of an HTTP/2 stream's head too, before any request
   * object is made for it.
   */
  function match(verb: string | undefined, path: string, headers: http2.IncomingHttpHeaders): DirectMethod | undefined {
    if (verb !== "POST") return undefined;
    const method = byPath.get(path);
    if (!method) return undefined;
    const type = headers["content-type"];
    if (type !== "application/grpc" && type !== contentTypeProto) return undefined;
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") return undefined;
    return method;
  }

  async function serve(method: DirectMethod, req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) {
    const abort = new CallAbort(res, o.shutdown);
    try {
      const timeout = parseTimeout(headerOf(req, "grpc-timeout") ?? null, Number.MAX_SAFE_INTEGER);
      if (timeout.error) throw timeout.error;
      const input = fromBinary(method.input, await readMessage(req, requestLimitOf(method, o.bodyLimitBytes)));
      const headers = new LazyRequestHeaders(req, isPseudoHeader) as unknown as HeadersInit;
      if (method.methodKind === "server_streaming") {
        await serveStream(method, res, abort.signal, timeout.timeoutMs, headers, input);
        return;
      }
      // The call's controller, not its signal: none is made unless the call asks for it.
      const out = await o.transport.unaryWith(
        method,
        abort.controller,
        timeout.timeoutMs ?? (o.requestTimeoutMs > 0 ? o.requestTimeoutMs : undefined),
        headers,
        input as never,
        o.contextValues(res),
      );
      if (isGone(res)) return;
      const sent = sentHeaders(out);
      res.writeHead(200, { ...plain(sent.header), "content-type": contentTypeProto });
      res.addTrailers({ ...plain(sent.trailer), "grpc-status": "0" });
      // A large bytes field (ReadFile's data) goes out as the handler gave it, not copied twice.
      for (const piece of encodeEnveloped(method.output, out.message as Message, { anyOrder: true })) res.write(piece);
      res.end();
    } catch (e) {
      if (isGone(res)) return;
      const trailer = plain(setTrailerStatus(new Headers(), errorOf(e)));
      if (!res.headersSent) {
        // Trailers-only (one HEADERS frame ending the stream): a client
        // learns the status with the response headers, so a stream that
        // failed before it opened is told apart from one that opened.
        if (!res.stream.destroyed && !res.stream.headersSent) {
          res.stream.respond(
            { ...res.getHeaders(), ":status": 200, "content-type": contentTypeProto, ...trailer },
            { endStream: true },
          );
        }
        return;
      }
      // A stream that failed after its headers went out still ends with a
      // status, not a reset.
      res.addTrailers(trailer);
      res.end();
    } finally {
      abort.release();
    }
  }

  /**
   * Writes each message as it comes, waiting only when the socket's buffer
   * is full. An error before the first message (or before the handler
   * opened the stream with openStream) is answered by the caller as a
   * trailers-only status; later ones end the stream with their status. The
   * message the contract declares last (last_message) goes out with the OK
   * status at once; the handler's teardown after it (compute's exec: the
   * driver's end, the span, the sandbox's release, then the interceptors'
   * metrics) runs once both have left (afterLast), where the status used
   * to wait for it: 0.3-0.6 ms an exec (packages/bench/ANALYSIS.md, grpc-js).
   */
  async function serveStream(
    method: DescMethodServerStreaming,
    res: http2.Http2ServerResponse,
    signal: AbortSignal,
    timeoutMs: number | undefined,
    headers: HeadersInit,
    input: Message,
  ): Promise<void> {
    const values = o.contextValues(res);
    const opened = whenOpened(values);
    const out = await o.transport.stream(method, signal, timeoutMs, headers, oneMessage(input as never), values);
    const it = (out.message as AsyncIterable<Message>)[Symbol.asyncIterator]();
    const first = it.next();
    const isLast = lastOf.get(method);
    let r: IteratorResult<Message> | undefined;
    // Every way out closes the handler's stream unless it ended: a handler
    // left suspended at a yield never runs its finally (a held sandbox, an
    // open span), which a client gone before the first message used to do.
    try {
      await opened.orFirst(first);
      if (isGone(res)) return;
      res.writeHead(200, { ...plain(sentHeaders(out).header), "content-type": contentTypeProto });
      let last = false;
      try {
        r = await first;
        let flushed = false;
        while (!r.done) {
          const room = writeMessage(res, method, r.value);
          if (isLast?.(r.value)) {
            last = true;
            break;
          }
          if (!room) await drained(res);
          else if (!flushed) await firstFlushed();
          flushed = true;
          if (isGone(res)) return;
          r = await it.next();
        }
        res.addTrailers({ ...plain(sentHeaders(out).trailer), "grpc-status": "0" });
      } catch (e) {
        if (isGone(res)) return;
        res.addTrailers(plain(setTrailerStatus(new Headers(), errorOf(e))));
      }
      res.end();
      if (last) r = await afterLast(method, res, it, values);
    } finally {
      if (!r?.done) {
        // The pending first message settles (the call's signal ended the handler's work) before the return.
        await first.catch(() => {});
        await it.return?.().catch(() => {});
      }
    }
  }

  /**
   * The rest of a stream answered at its last message: read to its end
   * once the message and the status have left (the teardown's CPU would
   * otherwise run first, as node sends them from the next turns). Counted
   * in flight meanwhile. The call's signal does not abort for the
   * response's close (it was ended), so the handler ends as it would have
   * (no cancel), and the call's outcome (metrics, span) is recorded when it
   * does. What it yields after its last message is dropped, and a failure
   * logged: the client has its status. Undefined when it failed.
   */
  async function afterLast(
    method: DescMethodServerStreaming,
    res: http2.Http2ServerResponse,
    it: AsyncIterator<Message>,
    values: ContextValues,
  ): Promise<IteratorResult<Message> | undefined> {
    o.inflight?.begin();
    try {
      await sent(res);
      let dropped = 0;
      for (let r = await it.next(); ; r = await it.next()) {
        if (r.done) {
          if (dropped > 0)
            o.logger?.(values).warn(
              { procedure: `${method.parent.typeName}/${method.name}`, dropped },
              "messages after the stream's declared last message were dropped",
            );
          return r;
        }
        dropped++;
      }
    } catch (err) {
      o.logger?.(values).warn(
        { err, procedure: `${method.parent.typeName}/${method.name}` },
        "the handler failed after its stream's last message (its status was sent)",
      );
      return undefined;
    } finally {
      o.inflight?.end();
    }
  }

  return { match, serve };
}

/**
 * Resolves once an ended response has handed its last frames (a stream's
 * status trailers) to the socket, or is gone: node sends them from the turns
 * after the end (the DATA, then the trailers node asks for), and work begun
 * before would delay them. A response held back by flow control resolves
 * when the client reads, or when its stream closes.
 */
function sent(res: NodeResponse): Promise<void> {
  if (res.writableFinished || isGone(res)) return Promise.resolve();
  return eventOrClose(res, "finish");
}

/**
 * Resolves once the HTTP/2 session has sent what was written before: node's
 * HTTP/2 sends a session's frames from an immediate queued by the first
 * write, which runs before one queued now. Awaited after a stream's first
 * message, so its headers and that message leave before the handler's next
 * step: otherwise a handler that ends after it (an exec's `completed`) had
 * its teardown, the call's metrics and the status run first, and the
 * client saw nothing until all of it was done (packages/bench/ANALYSIS.md,
 * grpc-js: first event to headers at the client 0.2 ms behind grpc-js,
 * which sends the first message before it takes the next). The status
 * trailers leave one turn later than they did (node sends them when its
 * session asks, after the last DATA); the client reads the first frames
 * meanwhile.
 */
function firstFlushed(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** The direct gRPC path of a server: `match` a request, then `serve` it. */
export type GrpcDirect = ReturnType<typeof createGrpcDirect>;

/**
 * Writes one enveloped message: exec output's bytes go out as the handler
 * gave them, never copied (spliced-encoding.ts), so a handler must not
 * change bytes it has yielded.
 */
function writeMessage(res: http2.Http2ServerResponse, method: DirectMethod, message: Message): boolean {
  let ok = true;
  for (const piece of encodeEnveloped(method.output, message)) ok = res.write(piece);
  return ok;
}

function errorOf(e: unknown): ConnectError {
  if (e instanceof ConnectError) return boundConnectError(e);
  // The router's error interceptor has converted the handler's errors; this
  // is the transport's own (a malformed message).
  return new ConnectError(e instanceof Error ? e.message : "protocol error", Code.InvalidArgument);
}

/**
 * The one enveloped message of a unary request. The frames are copied into
 * one buffer of the message's size as they come (the prefix gives it):
 * held until the end, a 16 MiB message's frames outlived a few
 * young-generation collections, and V8 then needed a full mark-compact to
 * free them. Read with listeners, not `for await`: the request's async
 * iterator cost about a dozen promises a call (each with its async-context
 * hook) and end-of-stream bookkeeping, on every call's way to its handler
 * (packages/bench/ANALYSIS.md, grpc-js). What it did on a failure is kept:
 * a request whose message is refused is destroyed, and one that closes
 * before its end fails the read.
 */
export function readMessage(req: http2.Http2ServerRequest, limit: number): Promise<Uint8Array> {
  return new Promise((resolve, reject) => new MessageRead(req, limit, resolve, reject));
}

/**
 * One read of a request's message: its four listeners are arrow functions
 * of this one object, made in the constructor rather than as class fields:
 * the bundles' keepNames names each field's arrow with a defineProperty
 * (~3 us a call in a profile of the server), an assignment's arrow it leaves
 * alone.
 */
class MessageRead {
  readonly #assembler: EnvelopeAssembler;
  #settled = false;
  readonly #data: (chunk: Buffer) => void;
  readonly #end: () => void;
  readonly #error: (e: unknown) => void;
  readonly #close: () => void;

  constructor(
    private readonly req: http2.Http2ServerRequest,
    limit: number,
    private readonly resolve: (message: Uint8Array) => void,
    private readonly reject: (e: unknown) => void,
  ) {
    this.#assembler = new EnvelopeAssembler(limit, "input");
    this.#data = (chunk) => {
      try {
        this.#assembler.push(chunk);
      } catch (e) {
        this.#fail(e);
      }
    };
    this.#end = () => {
      if (this.#settled) return;
      this.#settled = true;
      this.#detach();
      let message: Uint8Array;
      try {
        message = this.#assembler.message();
      } catch (e) {
        this.reject(e);
        return;
      }
      this.resolve(message);
    };
    this.#error = (e) => this.#fail(e);
    this.#close = () => {
      if (!this.req.readableEnded) this.#fail(new ConnectError("client went away", Code.Canceled));
    };
    req.on("data", this.#data);
    req.on("end", this.#end);
    req.on("error", this.#error);
    req.on("close", this.#close);
  }

  #detach(): void {
    this.req.off("data", this.#data);
    this.req.off("end", this.#end);
    this.req.off("close", this.#close);
    // The error listener stays: a destroy below, or a late error of the request, is not a crash.
  }

  #fail(e: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#detach();
    // As `for await` left it: the rest of the body is not read.
    if (!this.req.destroyed) this.req.destroy();
    this.reject(e);
  }
}

function plain(h: Headers | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  h?.forEach((v, k) => {
    out[k] = v;
  });
  return out;
}

function isPseudoHeader(name: string): boolean {
  return name.startsWith(":");
}
