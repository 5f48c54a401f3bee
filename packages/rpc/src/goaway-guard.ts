import type * as http2 from "node:http2";
import type { GrpcTransportOptions } from "@connectrpc/connect-node";
import { widenConnectionWindow } from "./http2-windows.ts";

type NodeHttp2ClientSessionManager = NonNullable<GrpcTransportOptions["sessionManager"]>;

/**
 * Works around connectrpc/connect-es#1768 (open): when a server sends GOAWAY
 * on an idle connection (identity or compute restarting) and a new request
 * reconnects before the old socket closed, the session's deferred error is
 * raised with no listener and crashes the process. Every session that
 * carried a request gets a listener that drops that late error; the
 * manager's own listeners still handle errors while it tracks the session.
 * Seeing each new session first, it also widens its connection window.
 */
export class GoawayGuardedSessions implements NodeHttp2ClientSessionManager {
  readonly #guarded = new WeakSet<http2.ClientHttp2Session>();
  constructor(private readonly inner: NodeHttp2ClientSessionManager) {}

  get authority(): string {
    return this.inner.authority;
  }

  async request(
    method: string,
    path: string,
    headers: http2.OutgoingHttpHeaders,
    options: Omit<http2.ClientSessionRequestOptions, "signal">,
  ): Promise<http2.ClientHttp2Stream> {
    const stream = await this.inner.request(method, path, headers, options);
    const session = stream.session as http2.ClientHttp2Session | undefined;
    if (session && !this.#guarded.has(session)) {
      this.#guarded.add(session);
      session.on("error", () => {});
      widenConnectionWindow(session);
    }
    return stream;
  }

  notifyResponseByteRead(stream: http2.ClientHttp2Stream): void {
    this.inner.notifyResponseByteRead(stream);
  }
}
