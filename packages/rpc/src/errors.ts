import { type Code as ConnectCode, ConnectError } from "@connectrpc/connect";
import { Code, codeName, PlatformError } from "@platform/errors";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";

/** ErrorInfo.domain of errors raised by platform services. */
export const errorDomain = "platform";
const httpStatusKey = "http_status";

/**
 * PlatformError → ConnectError carrying a google.rpc.ErrorInfo detail
 * (reason, metadata = extra + http_status). A ConnectError passes through;
 * anything else becomes a bare `internal` so no stack, SQL or secret leaves
 * the process (the original stays as `cause` for the log).
 */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const p = PlatformError.from(err);
  const metadata: Record<string, string> = { ...p.extra };
  if (p.httpStatus !== undefined) metadata[httpStatusKey] = String(p.httpStatus);
  return new ConnectError(
    p.message,
    p.code as number as ConnectCode,
    undefined,
    [{ desc: ErrorInfoSchema, value: { reason: p.reason, domain: errorDomain, metadata } }],
    p.cause ?? p,
  );
}

/**
 * ConnectError (or anything a client threw) → PlatformError with the reason,
 * extra fields and HTTP status override of its ErrorInfo detail, so a service
 * calling another gets the domain error back.
 */
export function fromConnectError(err: unknown): PlatformError {
  if (err instanceof PlatformError) return err;
  const ce = ConnectError.from(err);
  const code = ce.code as number as Code;
  const info = ce.findDetails(ErrorInfoSchema)[0];
  // An internal failure no platform service reported (Connect wrapping a
  // client-side exception) keeps its text for the log only.
  if ((code === Code.Internal || code === Code.Unknown) && info?.domain !== errorDomain) return PlatformError.internal(undefined, ce);
  const extra: Record<string, string> = {};
  let httpStatus: number | undefined;
  if (info) {
    for (const [k, v] of Object.entries(info.metadata)) {
      if (k === httpStatusKey) {
        const n = Number(v);
        if (Number.isInteger(n) && n >= 100 && n <= 599) httpStatus = n;
      } else extra[k] = v;
    }
  }
  return new PlatformError(code, info?.reason || codeName(code), ce.rawMessage, extra, { cause: ce, httpStatus });
}
