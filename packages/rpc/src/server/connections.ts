import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import type * as tls from "node:tls";
import type { Logger } from "pino";
import type { NodeRequest, NodeResponse } from "../http/node-io.ts";
import { HTTP2_SESSION_MEMORY_MB, HTTP2_STREAM_WINDOW, widenConnectionWindow } from "../http2-windows.ts";
import { createTlsListener } from "../tls/listener.ts";
import type { ServiceTls } from "../tls/service-tls.ts";
import { duplicateListenHandle } from "./accept-handles.ts";
import { stampAccepted } from "./accept-wait.ts";
import { type StreamTaker, takeStreamsFirst } from "./direct-streams.ts";
import { LISTEN_BACKLOG, MAX_CONCURRENT_STREAMS } from "./listen-limits.ts";

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** A plaintext connection whose protocol its first bytes have not told yet: its deadline, the bytes held. */
const SNIFF = Symbol("platform.sniff");
type Sniffed = net.Socket & { [SNIFF]?: { timer: NodeJS.Timeout; held?: Buffer } };

/** The deadline of a connection that has not said its protocol in time. */
function endSilent(socket: net.Socket): void {
  socket.destroy();
}

/**
 * A sniffed socket's error listener. Not a closure in dispatch: it would keep
 * dispatch's scope (the first bytes read, a pooled slice pinning its 8 KiB
 * pool, and the sniffing timer) alive for as long as the connection is open.
 */
function destroySocket(this: net.Socket): void {
  this.destroy();
}

/** A refused first request's connection closed: its READ_HEADER_TIMEOUT bound goes with it. */
function clearSniffTimer(this: Sniffed): void {
  const state = this[SNIFF];
  if (state) clearTimeout(state.timer);
  this[SNIFF] = undefined;
}

export interface ConnectionsOptions {
  /** Where each request of every connection goes. */
  onRequest: (req: NodeRequest, res: NodeResponse) => void;
  readHeaderTimeoutMs: number;
  /** The request deadline (0: none); receiving a whole HTTP/1.1 request must also fit in it. */
  requestTimeoutMs: number;
  /** Internal listeners: TLS only, with a client certificate of the CA. */
  tls: ServiceTls | undefined;
  logger: Logger;
  /**
   * Descriptors of each listening socket that accept connections (default 1):
   * each takes one connection per event-loop turn (see accept-handles.ts).
   */
  acceptHandles?: number;
  /**
   * Offered the first bytes of each new HTTP/1.1 connection before the HTTP
   * parser: true when it answered them and ended the connection (the request
   * entry's refuseFirst); the connection is then only read to its end, or
   * destroyed at READ_HEADER_TIMEOUT from its accept.
   */
  refuseFirst?: (socket: net.Socket, bytes: Buffer) => boolean;
  /** Offered each new HTTP/2 stream before Node's compatibility layer makes its request and response (direct-streams.ts). */
  takeStream?: StreamTaker;
}

export interface Connections {
  /** Listens on `host:port` (0: any free port); resolves with the port. */
  listen(port: number, host: string): Promise<number>;
  /** The service name of the client certificate of a request's connection (internal listeners). */
  callerOf(req: NodeRequest): string | undefined;
  /** True once `stopAccepting` was called. */
  readonly closing: boolean;
  /** Stops accepting connections and ends the idle ones (HTTP/1.1 keep-alive, HTTP/2 sessions, gracefully). */
  stopAccepting(): void;
  /** Ends idle HTTP/1.1 keep-alive connections. */
  closeIdle(): void;
  /** Ends every connection at once; resolves when the listeners are closed. */
  destroyAll(): Promise<void>;
}

/**
 * Connection handling: the listening sockets, HTTP/1.1 and HTTP/2 (h2c told
 * apart by the preface, TLS by ALPN) on one port, READ_HEADER_TIMEOUT for
 * both, and every socket tracked so a shutdown can end them.
 */
export function createConnections(o: ConnectionsOptions): Connections {
  let closing = false;
  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();
  const { readHeaderTimeoutMs, requestTimeoutMs } = o;

  const h1 = http.createServer(
    {
      headersTimeout: readHeaderTimeoutMs,
      // Receiving the whole request (headers and body) must also end within
      // the request deadline: a trickled body cannot hold a socket forever.
      requestTimeout: requestTimeoutMs > 0 ? Math.max(requestTimeoutMs, readHeaderTimeoutMs) : 0,
      connectionsCheckingInterval: Math.min(1000, readHeaderTimeoutMs),
    },
    o.onRequest,
  );
  // Node starts its header/request timeout checks when an http.Server emits
  // "listening"; this one never listens itself (sockets are handed over), so
  // start them explicitly.
  h1.emit("listening");
  const h2 = http2.createServer(
    {
      maxSessionMemory: HTTP2_SESSION_MEMORY_MB,
      settings: { initialWindowSize: HTTP2_STREAM_WINDOW, maxConcurrentStreams: MAX_CONCURRENT_STREAMS },
    },
    o.onRequest,
  );
  if (o.takeStream) takeStreamsFirst(h2, o.takeStream);
  h2.on("session", (s) => {
    sessions.add(s);
    widenConnectionWindow(s);
    // READ_HEADER_TIMEOUT for HTTP/2: a connection must open its first
    // stream in time (later idle periods are the client's business).
    const t = setTimeout(() => s.destroy(), readHeaderTimeoutMs);
    s.once("stream", () => clearTimeout(t));
    s.once("close", () => {
      clearTimeout(t);
      sessions.delete(s);
    });
  });

  // One listener for every connection, not a closure each: in a storm every
  // connection's setup is on the loop time its refusal waits for.
  const untrack = function (this: net.Socket) {
    sockets.delete(this);
  };
  // Registers a raw connection for shutdown; false when it is refused.
  const track = (socket: net.Socket): boolean => {
    stampAccepted(socket);
    sockets.add(socket);
    socket.on("close", untrack);
    if (closing) socket.destroy();
    return !closing;
  };

  // The first bytes of a plaintext connection decide its protocol. The handler
  // is one function for every connection, its state on the socket, so a
  // connection costs no closures here (issue 15 item 4: the sniff was ~13 %
  // of the loop's time per refused login in a storm).
  const onFirstBytes = function (this: Sniffed, chunk: Buffer) {
    const state = this[SNIFF]!;
    const buf = state.held ? Buffer.concat([state.held, chunk]) : chunk;
    const n = Math.min(buf.length, H2_PREFACE.length);
    const isPrefix = buf.compare(H2_PREFACE, 0, n, 0, n) === 0;
    if (isPrefix && buf.length < H2_PREFACE.length) {
      state.held = buf;
      return;
    }
    this.off("data", onFirstBytes);
    if (!isPrefix && o.refuseFirst?.(this, buf)) {
      // Answered and ended; it lingers only until the client's close or the sniff's deadline.
      state.held = undefined;
      this.once("close", clearSniffTimer);
      return;
    }
    clearTimeout(state.timer);
    this[SNIFF] = undefined;
    if (isPrefix) {
      // The http2 session drains the socket's buffered bytes itself.
      this.pause();
      this.unshift(buf);
      h2.emit("connection", this);
    } else {
      // The HTTP/1.1 parser takes the socket's reads from here on; the bytes
      // already read go to its data listener now, not back through the
      // stream's buffer (an unshift and resume: a second pass through the
      // stream machinery and a tick later).
      h1.emit("connection", this);
      this.emit("data", buf);
    }
  };

  // A TLS connection says its protocol by ALPN; a plaintext one (or TLS
  // without ALPN) by its first bytes: Node's plaintext http2 server ignores
  // allowHTTP1, so peek at them for the HTTP/2 preface.
  const dispatch = (socket: net.Socket | tls.TLSSocket) => {
    // A TLS socket is not the raw one `track` stamped: its wait counts from the handshake's end.
    stampAccepted(socket);
    const alpn = (socket as tls.TLSSocket).alpnProtocol;
    if (alpn === "h2") return void h2.emit("connection", socket);
    if (alpn === "http/1.1") return void h1.emit("connection", socket);
    (socket as Sniffed)[SNIFF] = { timer: setTimeout(endSilent, readHeaderTimeoutMs, socket) };
    socket.on("data", onFirstBytes);
    socket.on("error", destroySocket);
  };

  const tlsListener = o.tls
    ? createTlsListener({
        tls: o.tls,
        handshakeTimeoutMs: readHeaderTimeoutMs,
        track: (socket) => void track(socket),
        dispatch: (socket) => dispatch(socket),
        logger: o.logger,
      })
    : undefined;

  const netServers: net.Server[] = [];
  const newServer = (): net.Server =>
    tlsListener
      ? tlsListener.createServer()
      : net.createServer({ noDelay: true }, (socket) => {
          if (track(socket)) dispatch(socket);
        });
  // More descriptors of `s`'s socket, each accepting on its own (a failure leaves one: slower bursts, nothing else).
  const addAcceptHandles = async (s: net.Server): Promise<void> => {
    const extra = (o.acceptHandles ?? 1) - 1;
    if (extra <= 0) return;
    const handle = (s as unknown as { _handle?: object })._handle;
    let copies: object[] = [];
    try {
      if (!handle) throw new Error("the listening server has no handle");
      copies = await duplicateListenHandle(handle, extra);
      while (copies.length > 0) {
        const more = newServer();
        await new Promise<void>((resolve, reject) => {
          more.once("error", reject);
          // The backlog is the socket's, shared by every descriptor: listen() again with the same one.
          more.listen(copies[0], LISTEN_BACKLOG, () => resolve());
        });
        copies.shift();
        netServers.push(more);
        if (closing) more.close();
      }
    } catch (err) {
      for (const copy of copies) (copy as { close?: () => void }).close?.();
      o.logger.warn({ err }, "could not add accept handles: fewer descriptors accept this port's connections");
    }
  };
  return {
    listen: (port, host) =>
      new Promise<number>((resolve, reject) => {
        const s = newServer();
        s.once("error", reject);
        s.listen(port, host, LISTEN_BACKLOG, () => {
          netServers.push(s);
          const bound = (s.address() as net.AddressInfo).port;
          void addAcceptHandles(s).then(() => resolve(bound));
        });
      }),
    callerOf: (req) => tlsListener?.callerOf(req),
    get closing() {
      return closing;
    },
    stopAccepting() {
      closing = true;
      for (const s of netServers) s.close();
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
    },
    closeIdle: () => h1.closeIdleConnections(),
    async destroyAll() {
      h1.closeAllConnections();
      h1.close(() => {});
      for (const s of sockets) s.destroy();
      await Promise.all(netServers.map((s) => new Promise((r) => s.close(() => r(undefined)))));
    },
  };
}
