import { type Code as ConnectCode, ConnectError } from "@connectrpc/connect";
import { Code, codeName, PlatformError } from "@platform/errors";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";
import { HTTP_STATUS_KEY as httpStatusKey } from "./error-bounds.ts";

/** ErrorInfo.domain of errors raised by platform services. */
export const errorDomain = "platform";

// The PlatformError each ConnectError the error interceptor threw was made
// from, so the REST transcoder renders that error itself instead of one read
// back out of the ErrorInfo.
const madeFrom = new WeakMap<ConnectError, PlatformError>();

/** Records that `ce` carries `p` (the error interceptor, for every PlatformError it converts). */
export function carryPlatformError(ce: ConnectError, p: PlatformError): ConnectError {
  madeFrom.set(ce, p);
  return ce;
}

/** The PlatformError a service's handler raised that `err` carries, if it is such a ConnectError. */
export function platformErrorOf(err: unknown): PlatformError | undefined {
  return err instanceof ConnectError ? madeFrom.get(err) : undefined;
}

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
  const retryAfter = retryAfterOf(p);
  return new ConnectError(
    p.message,
    p.code as number as ConnectCode,
    retryAfter ? { "retry-after": retryAfter } : undefined,
    [{ desc: ErrorInfoSchema, value: { reason: p.reason, domain: errorDomain, metadata } }],
    p.cause ?? p,
  );
}

/** Seconds to wait before retrying an UNAVAILABLE that names none (the runtime's 503 says 5 too). */
export const DEFAULT_RETRY_AFTER_SECONDS = 5;

/**
 * The one rule for `Retry-After` (an HTTP header on REST, response metadata
 * on gRPC): a refusal that names when to come back (`retry_after`: 429 too
 * many attempts, 503 busy) says so, and every UNAVAILABLE (a dependency
 * down, the service overloaded) says when at the latest, so a client never
 * has to guess whether a 503 is worth retrying.
 */
export function retryAfterOf(p: PlatformError): string | undefined {
  const named = p.extra.retry_after;
  if (named !== undefined && /^\d{1,6}$/.test(named)) return named;
  return p.code === Code.Unavailable ? String(DEFAULT_RETRY_AFTER_SECONDS) : undefined;
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
  if ((code === Code.Internal || code === Code.Unknown) && info?.domain !== errorDomain)
    return PlatformError.internal(undefined, ce);
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
