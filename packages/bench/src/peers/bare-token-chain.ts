import * as http from "node:http";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { ServiceTls } from "@platform/rpc";
import pg from "pg";
import { envelope, respondGrpcOk, startBareHttp2 } from "./bare-http2.ts";

/**
 * The per-token figure's hops floor: the path of a streamed token (agents →
 * tenant worker → router → client), each hop the least a Node server can
 * be. The source (agents' stand-in) stamps each token, commits one row (when
 * given a database) and writes it as a gRPC message on an HTTP/2 stream with
 * mutual TLS; the relay (the worker's) forwards that stream's bytes from an
 * HTTP/2 connection of its own to the source; the edge (the router's, in the
 * bench process as ours is) reads the relay's stream and writes each message
 * as one SSE event on HTTP/1.1. No framework, log, authentication beyond the
 * TLS, or decoding between the ends.
 */
const PATH = "/bench.Tokens/Stream";
type Tls = Pick<ServiceTls, "ca" | "cert" | "key">;

/** Tokens and pacing of a stream, from its request's headers. */
function pacing(headers: http2.IncomingHttpHeaders | http.IncomingHttpHeaders): { count: number; intervalUs: number } {
  const count = Math.min(10_000, Math.max(0, Number(headers["x-tokens"]) || 0));
  const intervalUs = Math.min(1_000_000, Math.max(0, Number(headers["x-interval-us"]) || 0));
  return { count, intervalUs };
}

/** Reads a request's body to its end, then calls `then` (nothing for a stream the client reset). */
function afterBody(stream: http2.ServerHttp2Stream, then: () => void): void {
  stream.on("data", () => {});
  stream.on("error", () => {});
  stream.on("end", () => {
    if (!stream.destroyed) then();
  });
}

/** An HTTP/2 connection with mutual TLS to `url`, made on first use and again after it closes. */
function upstream(
  url: string,
  tls: Tls,
): { request(headers: http2.OutgoingHttpHeaders): http2.ClientHttp2Stream; close(): void } {
  let session: http2.ClientHttp2Session | undefined;
  const connect = () => {
    const s = http2.connect(url, { ca: tls.ca, cert: tls.cert, key: tls.key });
    s.on("error", () => {});
    s.once("close", () => {
      if (session === s) session = undefined;
    });
    return s;
  };
  return {
    request(headers) {
      session ??= connect();
      return session.request({ ":method": "POST", ":path": PATH, "content-type": "application/grpc", ...headers });
    },
    close: () => session?.close(),
  };
}

/** agents' stand-in: paced tokens, each stamped (CLOCK_MONOTONIC ns, as bench/paced stamps), committed, then written. */
export async function startTokenSource(
  host: string,
  tls: ServiceTls,
  databaseUrl?: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const db = databaseUrl ? new pg.Client({ connectionString: databaseUrl }) : undefined;
  await db?.connect();
  await db?.query("create table if not exists bench_token_floor (id bigserial primary key, body text not null)");
  const server = await startBareHttp2(host, tls, (stream, headers) =>
    afterBody(stream, async () => {
      const { count, intervalUs } = pacing(headers);
      respondGrpcOk(stream);
      try {
        for (let i = 0; i < count && !stream.destroyed; i++) {
          // A timer, never a spin, as the paced model waits.
          await sleep(intervalUs / 1000);
          const text = `${process.hrtime.bigint()};`;
          await db?.query("insert into bench_token_floor (body) values ($1)", [text]);
          stream.write(envelope(Buffer.from(text)));
        }
        stream.end();
      } catch {
        stream.destroy();
      }
    }),
  );
  return {
    url: server.url,
    close: async () => {
      await server.close();
      await db?.query("drop table if exists bench_token_floor").catch(() => {});
      await db?.end();
    },
  };
}

/** The tenant worker's stand-in: each stream forwarded, bytes as they come, from its own connection to `to`. */
export async function startTokenRelay(
  host: string,
  tls: ServiceTls,
  to: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const up = upstream(to, tls);
  const server = await startBareHttp2(host, tls, (stream, headers) =>
    afterBody(stream, () => {
      const source = up.request({
        "x-tokens": String(headers["x-tokens"]),
        "x-interval-us": String(headers["x-interval-us"]),
      });
      source.end();
      source.on("response", () => {
        respondGrpcOk(stream);
      });
      source.on("data", (chunk: Buffer) => stream.write(chunk));
      source.on("end", () => stream.end());
      source.on("error", () => stream.destroy());
      stream.once("close", () => source.close());
    }),
  );
  return {
    url: server.url,
    close: async () => {
      up.close();
      await server.close();
    },
  };
}

/**
 * The router's stand-in, in this process: POST /invoke with x-tokens and
 * x-interval-us headers answers text/event-stream, one `data:` event per
 * message of its stream from the relay at `to`.
 */
export async function startTokenEdge(
  host: string,
  tls: Tls,
  to: string,
): Promise<{ url: string; close(): Promise<void> }> {
  const up = upstream(to, tls);
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const { count, intervalUs } = pacing(req.headers);
      const relay = up.request({ "x-tokens": String(count), "x-interval-us": String(intervalUs) });
      relay.end();
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let pending: Buffer = Buffer.alloc(0);
      relay.on("data", (chunk: Buffer) => {
        pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
        while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
          const size = pending.readUInt32BE(1);
          res.write(`event: text\ndata: ${pending.toString("utf8", 5, 5 + size)}\n\n`);
          pending = pending.subarray(5 + size);
        }
      });
      relay.on("end", () => res.end());
      relay.on("error", () => res.destroy());
      res.once("close", () => relay.close());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        up.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
