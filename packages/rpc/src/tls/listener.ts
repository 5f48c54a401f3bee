import type { Socket } from "node:net";
import * as tls from "node:tls";
import type { Logger } from "pino";
import { type ServiceTls, serviceNameOf } from "./service-tls.ts";

// The caller's service name, read once per connection from its certificate.
// A symbol property: HTTP/2 requests see the socket through a proxy that
// forwards reads, so a WeakMap keyed by the socket would miss.
const CALLER = Symbol("platform.caller");

export interface TlsListenerOptions {
  tls: ServiceTls;
  handshakeTimeoutMs: number;
  /** Registers a raw connection for shutdown (and ends it if the server is closing). */
  track(socket: Socket): void;
  /** Hands an authenticated connection to the HTTP/1.1 or HTTP/2 server. */
  dispatch(socket: tls.TLSSocket): void;
  logger: Logger;
}

export interface TlsListener {
  createServer(): tls.Server;
  /** The service name of the client certificate of a request's connection. */
  callerOf(req: { socket: unknown }): string | undefined;
}

/**
 * The TLS side of an internal listener: only clients presenting a
 * certificate of the CA that names a platform service get past the
 * handshake; Node refuses the rest (rejectUnauthorized).
 */
export function createTlsListener(options: TlsListenerOptions): TlsListener {
  const context = {
    ca: options.tls.ca,
    cert: options.tls.cert,
    key: options.tls.key,
    requestCert: true,
    rejectUnauthorized: true,
    ALPNProtocols: ["h2", "http/1.1"],
    minVersion: "TLSv1.2" as const,
    handshakeTimeout: options.handshakeTimeoutMs,
    // Small writes leave at once: an SSE event or a gRPC message written
    // after the response headers must not wait for the client's delayed ACK
    // (Nagle's algorithm; ~40 ms on Linux).
    noDelay: true,
  };
  return {
    createServer() {
      const server = tls.createServer(context, (socket) => {
        const peer = socket.getPeerX509Certificate();
        const caller = peer ? serviceNameOf(peer) : undefined;
        if (!caller) {
          options.logger.warn({ subject: peer?.subject }, "refused a certificate that names no platform service");
          socket.destroy();
          return;
        }
        (socket as unknown as Record<symbol, string>)[CALLER] = caller;
        socket.on("error", () => socket.destroy());
        options.dispatch(socket);
      });
      server.on("connection", (raw) => options.track(raw));
      server.on("tlsClientError", (err) => {
        options.logger.debug({ err: err.message }, "TLS handshake refused");
      });
      return server;
    },
    callerOf(req) {
      const socket = req.socket as Record<symbol, string | undefined> | null | undefined;
      return socket?.[CALLER];
    },
  };
}
