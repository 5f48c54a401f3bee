import * as http2 from "node:http2";
import { type DescMethodServerStreaming, fromBinary, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type StreamRequest, type StreamResponse } from "@connectrpc/connect";
import type { GrpcTransportOptions } from "@connectrpc/connect-node";
import { validateResponse, validateTrailer } from "@connectrpc/connect/protocol-grpc";
import { copyInto, outgoing, resetCode } from "./h2-answer.ts";
import { encodeEnveloped } from "./spliced-encoding.ts";

type SessionManager = NonNullable<GrpcTransportOptions["sessionManager"]>;

/** Messages decoded ahead of the reader before the HTTP/2 stream is paused (its flow control then holds the server). */
const READ_AHEAD = 32;

/**
 * One server-streaming call in plain gRPC, the streaming counterpart of
 * direct-client.ts: the answer's frames are split into messages and decoded
 * in the stream's `data` callback and handed to the reader from a queue, one
 * promise a message. Connect's client took each message through about six
 * down-levelled async generators (the body's chunks, envelope split,
 * decompression, parse, the trailer check, runStreamingCall's wrapper),
 * several promises each, on every hop of a streamed token (router → tenant
 * worker → agents; packages/bench/ANALYSIS.md, per-token). Status, trailers,
 * trailers-only answers, the read limit, cancellation and resets follow the
 * gRPC protocol as Connect's client does.
 */
export async function directStream(
  sessions: SessionManager,
  readMaxBytes: number,
  req: StreamRequest,
): Promise<StreamResponse> {
  const method = req.method as DescMethodServerStreaming;
  // The request is one message (server streaming).
  const first = await req.message[Symbol.asyncIterator]().next();
  if (first.done) throw new ConnectError("protocol error: missing request message", Code.Internal);
  const url = new URL(req.url);
  if (req.signal.aborted) throw ConnectError.from(req.signal.reason, Code.Canceled);
  const stream = await sessions.request("POST", url.pathname + url.search, outgoing(req.header), {});
  const messages = new StreamMessages(stream, method, readMaxBytes, sessions);
  return new Promise<StreamResponse>((resolve, reject) => {
    const onAbort = () => {
      const e = ConnectError.from(req.signal.reason ?? "the operation was aborted", Code.Canceled);
      messages.fail(e);
      reject(e);
    };
    if (req.signal.aborted) return onAbort();
    req.signal.addEventListener("abort", onAbort, { once: true });
    messages.onSettled = () => req.signal.removeEventListener("abort", onAbort);
    messages.onOpenFailed = reject;
    stream.on("response", (h) => {
      const header = new Headers();
      copyInto(header, h);
      const { foundStatus, headerError } = validateResponse(Number(h[":status"] ?? 0), header);
      if (headerError) {
        messages.fail(headerError);
        reject(headerError);
        return;
      }
      messages.open(header, foundStatus);
      resolve({ ...req, stream: true, header, trailer: messages.trailer, message: messages } as StreamResponse);
    });
    for (const piece of encodeEnveloped(method.input, first.value as Message, { anyOrder: true })) stream.write(piece);
    stream.end();
  });
}

/**
 * An answer's messages, read from its HTTP/2 stream as they come. The
 * iterator has no return(), as Connect's client iterators have none: a
 * reader that stops early ends the call through its signal.
 */
class StreamMessages implements AsyncIterable<Message>, AsyncIterator<Message> {
  readonly trailer = new Headers();
  onSettled: (() => void) | undefined;
  /** The call's opening, while no headers came: a failure before them rejects it. */
  onOpenFailed: ((e: unknown) => void) | undefined;
  readonly #ready: Message[] = [];
  #at = 0;
  #header: Headers | undefined;
  /** Trailers-only answer: its status came with the headers. */
  #foundStatus = false;
  /** Fewer than a prefix's 5 bytes of the next message. */
  #pending: Buffer | undefined;
  /** A message begun in earlier frames: prefix and body in one buffer of its size, filled as frames come. */
  #body: Buffer | undefined;
  #filled = 0;
  #done = false;
  #failure: ConnectError | undefined;
  #waiter: { resolve: (r: IteratorResult<Message>) => void; reject: (e: unknown) => void } | undefined;
  #paused = false;

  constructor(
    private readonly stream: http2.ClientHttp2Stream,
    private readonly method: DescMethodServerStreaming,
    private readonly readMaxBytes: number,
    sessions: SessionManager,
  ) {
    stream.on("data", (chunk: Buffer) => {
      sessions.notifyResponseByteRead(stream);
      this.#data(chunk);
    });
    stream.on("trailers", (t) => copyInto(this.trailer, t));
    stream.on("end", () => this.#end());
    stream.on("error", (e) => this.fail(ConnectError.from(e, Code.Internal)));
    stream.on("close", () => {
      if (this.#done) return;
      const rst = stream.rstCode;
      this.fail(
        rst !== undefined && rst !== http2.constants.NGHTTP2_NO_ERROR
          ? new ConnectError(`stream reset (HTTP/2 code ${rst})`, resetCode(rst))
          : new ConnectError("protocol error: stream closed without a status", Code.Internal),
      );
    });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  open(header: Headers, foundStatus: boolean): void {
    this.#header = header;
    this.#foundStatus = foundStatus;
    this.onOpenFailed = undefined;
  }

  next(): Promise<IteratorResult<Message>> {
    if (this.#at < this.#ready.length) {
      const value = this.#ready[this.#at++]!;
      if (this.#at === this.#ready.length) {
        this.#ready.length = 0;
        this.#at = 0;
        if (this.#paused) {
          this.#paused = false;
          this.stream.resume();
        }
      }
      return Promise.resolve({ done: false, value });
    }
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#done) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
    });
  }

  /** Ends the call with `e` (a reset, the caller's abort, a protocol error); the stream is closed. */
  fail(e: ConnectError): void {
    if (this.#done) return;
    this.#done = true;
    this.#failure = e;
    this.onSettled?.();
    this.onOpenFailed?.(e);
    this.onOpenFailed = undefined;
    if (!this.stream.closed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.reject(e);
  }

  #data(chunk: Buffer): void {
    if (this.#done) return;
    let buf = chunk;
    try {
      const body = this.#body;
      if (body) {
        // Each frame is copied once, into place: joining it to what came before
        // copied the whole message so far again on every frame (quadratic: a
        // 1 MiB message in 16 KiB frames was ~64 MiB of copies).
        const n = Math.min(buf.length, body.length - this.#filled);
        body.set(n === buf.length ? buf : buf.subarray(0, n), this.#filled);
        this.#filled += n;
        if (this.#filled < body.length) return;
        this.#body = undefined;
        this.#message(body);
        buf = buf.subarray(n);
      } else if (this.#pending) {
        buf = Buffer.concat([this.#pending, buf]);
        this.#pending = undefined;
      }
      while (buf.length >= 5) {
        const length = buf.readUInt32BE(1);
        if (length > this.readMaxBytes)
          throw new ConnectError(
            `message size ${length} is larger than configured readMaxBytes ${this.readMaxBytes}`,
            Code.ResourceExhausted,
          );
        if (buf.length < 5 + length) {
          this.#body = Buffer.allocUnsafe(5 + length);
          buf.copy(this.#body);
          this.#filled = buf.length;
          return;
        }
        this.#message(buf.subarray(0, 5 + length));
        buf = buf.subarray(5 + length);
      }
    } catch (e) {
      this.fail(ConnectError.from(e, Code.Internal));
      return;
    }
    if (buf.length > 0) this.#pending = Buffer.from(buf);
  }

  /** One whole enveloped message (prefix included), decoded and delivered. */
  #message(enveloped: Buffer): void {
    if ((enveloped[0]! & 1) === 1)
      throw new ConnectError("protocol error: received compressed message without grpc-encoding", Code.Internal);
    this.#deliver(fromBinary(this.method.output, enveloped.subarray(5)) as Message);
  }

  #deliver(message: Message): void {
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      waiter.resolve({ done: false, value: message });
      return;
    }
    this.#ready.push(message);
    if (this.#ready.length - this.#at >= READ_AHEAD && !this.#paused) {
      this.#paused = true;
      this.stream.pause();
    }
  }

  #end(): void {
    if (this.#done) return;
    try {
      if (this.#pending || this.#body)
        throw new ConnectError("protocol error: premature end of stream", Code.InvalidArgument);
      if (!this.#foundStatus) validateTrailer(this.trailer, this.#header ?? new Headers());
    } catch (e) {
      this.fail(ConnectError.from(e, Code.Internal));
      return;
    }
    this.#done = true;
    this.onSettled?.();
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.resolve({ done: true, value: undefined });
  }
}
