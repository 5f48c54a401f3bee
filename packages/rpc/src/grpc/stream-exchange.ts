import { EventEmitter } from "node:events";
import type * as http2 from "node:http2";

/**
 * The request and response of a plain gRPC call taken from the HTTP/2
 * server's `stream` event (server/direct-streams.ts) in place of Node's
 * compatibility objects: Http2ServerRequest is a Readable of its own fed
 * from the stream's (a second buffer, resume/maybeReadMore/endReadable and
 * their ticks every call) and the pair adds ten listeners to the stream;
 * in a profile of identity under the VerifyToken figure that layer and its
 * garbage were most of the ~6x the CPU a bare node:http2 server spends a
 * call (packages/bench/ANALYSIS.md). These carry what the request entry
 * (server/requests.ts), dispatch and grpc-direct.ts use of a request and a
 * response, with the compatibility layer's behaviour where they rely on it
 * (noted below); the request reads the stream itself, the response writes
 * to it.
 */
export class StreamRequest {
  readonly httpVersionMajor = 2;
  readonly httpVersionMinor = 0;
  readonly httpVersion = "2.0";
  readonly method: string | undefined;
  readonly url: string | undefined;
  #destroyed = false;

  constructor(
    readonly stream: http2.ServerHttp2Stream,
    readonly headers: http2.IncomingHttpHeaders,
  ) {
    this.method = headers[":method"];
    this.url = headers[":path"];
  }

  /** The connection's socket, as the session shows it (what callerOf and acceptWaitMs read, through Node's proxy). */
  get socket(): http2.Http2Session["socket"] | undefined {
    return this.stream.session?.socket;
  }

  get readableEnded(): boolean {
    return this.stream.readableEnded;
  }

  get destroyed(): boolean {
    return this.#destroyed;
  }

  /**
   * Stops reading the request, as destroying an Http2ServerRequest does: the
   * HTTP/2 stream itself stays, so a refused message (over the size limit,
   * malformed) is still answered with its status rather than a reset.
   */
  destroy(): void {
    this.#destroyed = true;
    this.stream.pause();
  }

  on(event: string, listener: (...args: never[]) => void): this {
    this.stream.on(event, listener as (...args: unknown[]) => void);
    return this;
  }

  off(event: string, listener: (...args: never[]) => void): this {
    this.stream.off(event, listener as (...args: unknown[]) => void);
    return this;
  }
}

const kResponse = Symbol("platform.streamResponse");
type Carrying = http2.ServerHttp2Stream & { [kResponse]?: StreamResponse };

// The stream's listeners: one function each for every call, the response found on the stream.
function onStreamClose(this: Carrying): void {
  this[kResponse]?.closed();
}
function onStreamDrain(this: Carrying): void {
  this[kResponse]?.emit("drain");
}
function onWantTrailers(this: Carrying): void {
  this.sendTrailers(this[kResponse]?.trailers ?? {});
}
// A stream's error (a reset by the client) is its close, as in the compatibility layer: not the process's crash.
function ignoreStreamError(): void {}

/**
 * The response of a StreamRequest: its headers (the entry's ids, the
 * handler's), its messages, then the trailers that carry the status, sent
 * when the stream asks for them after its last DATA frame.
 */
export class StreamResponse extends EventEmitter {
  statusCode = 200;
  /** Sent when the stream asks for them (waitForTrailers). */
  trailers: http2.OutgoingHttpHeaders | undefined;
  #headers: http2.OutgoingHttpHeaders = {};
  #ending = false;
  #closed = false;

  constructor(readonly stream: http2.ServerHttp2Stream) {
    super();
    (stream as Carrying)[kResponse] = this;
    stream.on("close", onStreamClose);
    stream.on("drain", onStreamDrain);
    stream.on("wantTrailers", onWantTrailers);
    stream.on("error", ignoreStreamError);
  }

  get headersSent(): boolean {
    return this.stream.headersSent;
  }

  /** Whether end() was called (the compatibility response's meaning: CallAbort tells a client gone from a call answered by it). */
  get writableEnded(): boolean {
    return this.#ending;
  }

  get writableFinished(): boolean {
    return this.stream.writableFinished;
  }

  setHeader(name: string, value: string | number | readonly string[]): this {
    this.#headers[name.toLowerCase()] = value as string | number | string[];
    return this;
  }

  getHeader(name: string): string | number | string[] | undefined {
    return this.#headers[name.toLowerCase()];
  }

  getHeaders(): http2.OutgoingHttpHeaders {
    return { ...this.#headers };
  }

  writeHead(status: number, headers?: http2.OutgoingHttpHeaders): this {
    if (this.#closed || this.stream.destroyed) return this;
    this.statusCode = status;
    if (headers) for (const name of Object.keys(headers)) this.#headers[name.toLowerCase()] = headers[name];
    this.#headers[":status"] = status;
    this.stream.respond(this.#headers, { endStream: this.#ending, waitForTrailers: true });
    return this;
  }

  addTrailers(trailers: http2.OutgoingHttpHeaders): void {
    this.trailers = this.trailers ? Object.assign(this.trailers, trailers) : trailers;
  }

  write(chunk: Uint8Array | string): boolean {
    if (!this.stream.headersSent) this.writeHead(this.statusCode);
    return this.stream.write(chunk);
  }

  end(chunk?: Uint8Array | string): this {
    if (this.#closed || this.#ending) return this;
    if (chunk !== undefined) this.write(chunk);
    this.#ending = true;
    if (!this.stream.headersSent) this.writeHead(this.statusCode);
    if (this.stream.destroyed) this.closed();
    else this.stream.end();
    return this;
  }

  destroy(): void {
    this.stream.destroy();
  }

  /**
   * The stream closed (or was gone when the response ended): 'finish' and
   * then 'close', once, as the compatibility response emits them, so
   * whoever waits for the status to have left (grpc-direct's `sent`) wakes
   * when the stream is over rather than when its last DATA was queued.
   */
  closed(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.stream.off("wantTrailers", onWantTrailers);
    this.emit("finish");
    this.emit("close");
  }
}
