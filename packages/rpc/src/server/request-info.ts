import type { SpanContext } from "@opentelemetry/api";
import type { Logger } from "pino";
import { acceptOrGenerateRequestId, acceptOrGenerateTraceId, type RequestInfo } from "../context.ts";

/** Makes a call's RequestInfo from the ids a client sent (each replaced when unacceptable) and its caller. */
export type MakeRequestInfo = (
  requestId: string | null | undefined,
  traceId: string | null | undefined,
  caller?: string,
) => RequestInfo;

/** The server's RequestInfo maker: ids by the one rule of context.ts, a child of `logger` bound to them. */
export function requestInfoMaker(logger: Logger): MakeRequestInfo {
  return (rid, tid, caller) =>
    new ServerRequestInfo(logger, acceptOrGenerateRequestId(rid), acceptOrGenerateTraceId(tid), caller);
}

/** A class, not an object literal with a getter: that getter was a closure a request, kept as long as it is open. */
class ServerRequestInfo implements RequestInfo {
  remoteAddress: string | undefined = undefined;
  traceParent: SpanContext | undefined = undefined;
  /**
   * Made on first use: most requests log only their closing line, which
   * does not need it, and an open stream should not hold one.
   */
  #child: Logger | undefined;

  constructor(
    private readonly root: Logger,
    readonly requestId: string,
    readonly traceId: string,
    readonly caller: string | undefined,
  ) {}

  get logger(): Logger {
    this.#child ??= this.root.child({ requestId: this.requestId, traceId: this.traceId });
    return this.#child;
  }
}
