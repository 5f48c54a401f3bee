import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ServiceTls } from "@platform/rpc";

/**
 * A node:http2 server with a service's mutual TLS and nothing else, calling
 * `onStream` for each stream: the base of the bare gRPC peers (bare-grpc.ts,
 * bare-exec.ts). `close()` ends its open sessions too, which would otherwise
 * hold the server's close until they end.
 */
export async function startBareHttp2(
  host: string,
  tls: ServiceTls,
  onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void,
): Promise<{ url: string; close(): Promise<void> }> {
  const server = http2.createSecureServer({
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    requestCert: true,
    rejectUnauthorized: true,
  });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
  });
  server.on("stream", onStream);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sessions) s.destroy();
      }),
  };
}

/** A gRPC message: the 5-byte envelope (uncompressed, big-endian length) and `body`. */
export function envelope(body: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  out.set(body, 5);
  return out;
}

/** Answers a gRPC stream's headers; its trailers say OK once the stream ends (waitForTrailers). */
export function respondGrpcOk(stream: http2.ServerHttp2Stream): void {
  stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
  stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
}
