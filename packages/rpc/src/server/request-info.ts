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
  return (rid, tid, caller) => {
    const requestId = acceptOrGenerateRequestId(rid);
    const traceId = acceptOrGenerateTraceId(tid);
    // Made on first use: most requests log only their closing line, which
    // does not need it, and an open stream should not hold one.
    let child: Logger | undefined;
    return {
      requestId,
      traceId,
      caller,
      get logger() {
        child ??= logger.child({ requestId, traceId });
        return child;
      },
    };
  };
}
