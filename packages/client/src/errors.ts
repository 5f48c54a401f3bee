import { type Code as ConnectCode, ConnectError } from "@connectrpc/connect";
import { Code, codeName, PlatformError } from "@platform/errors";
import { ErrorInfoSchema } from "@platform/gen/google/rpc/error_details_pb";

/** ErrorInfo.domain of the errors platform services raise (as @platform/rpc sends them). */
export const PLATFORM_ERROR_DOMAIN = "platform";
/** ErrorInfo.domain of the errors this client raises itself (no service answered). */
export const CLIENT_ERROR_DOMAIN = "platform.client";
/** The ErrorInfo metadata key of the HTTP status (the services' own key, see @platform/rpc error-bounds.ts). */
const HTTP_STATUS_KEY = "http_status";

/** Reasons of the errors the client raises itself, when no service answered. */
export const ClientReason = {
  /** UNAVAILABLE: the request never got an answer (connection refused, DNS, reset before the status line). */
  unreachable: "unreachable",
  /** UNAVAILABLE: an event stream broke before its terminal event and could not be resumed. */
  streamInterrupted: "stream_interrupted",
  /** UNKNOWN: an answer that is not what the contract says (not JSON, wrong content type). */
  protocolError: "protocol_error",
  /** UNAUTHENTICATED: a call that needs a credential, made before login() or with no API key. */
  notLoggedIn: "not_logged_in",
} as const;

const codeByName = new Map<string, Code>(
  Object.values(Code)
    .filter((v): v is Code => typeof v === "number")
    .map((c) => [codeName(c), c]),
);

/** The Connect code of an HTTP status, for envelopes that carry only a reason (identity's `code`). */
export function codeOfStatus(status: number): Code {
  switch (status) {
    case 400:
    case 413:
    case 415:
    case 422:
      return Code.InvalidArgument;
    case 401:
      return Code.Unauthenticated;
    case 403:
      return Code.PermissionDenied;
    case 404:
      return Code.NotFound;
    case 405:
    case 501:
      return Code.Unimplemented;
    case 409:
      return Code.AlreadyExists;
    case 429:
      return Code.ResourceExhausted;
    case 499:
      return Code.Canceled;
    case 503:
      return Code.Unavailable;
    case 504:
      return Code.DeadlineExceeded;
    default:
      return status >= 500 ? Code.Internal : Code.Unknown;
  }
}

type Envelope = { code?: unknown; message?: unknown; error?: { code?: unknown; message?: unknown; reason?: unknown } };

/**
 * A REST error answer as the ConnectError a gRPC call of the same RPC would
 * have raised: the code, the message, and a google.rpc.ErrorInfo with the
 * reason and the extra fields (metadata, plus `http_status`). Reads both
 * envelopes of the specification: identity's `{"code": "<reason>",
 * "message", ...extra}` and agents' and the router's `{"error": {"code":
 * "<code name>", "message", "reason"?}}`.
 */
export function errorFromResponse(status: number, headers: Headers, text: string): ConnectError {
  let body: Envelope | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) body = parsed as Envelope;
  } catch {
    // Not JSON (a proxy's page): the status alone.
  }
  const metadata: Record<string, string> = { [HTTP_STATUS_KEY]: String(status) };
  let code = codeOfStatus(status);
  let reason = `http_${status}`;
  let message = text.slice(0, 200) || `HTTP ${status}`;
  const inner = body?.error;
  if (inner && typeof inner === "object" && typeof inner.code === "string") {
    code = codeByName.get(inner.code) ?? code;
    reason = typeof inner.reason === "string" && inner.reason ? inner.reason : inner.code;
    if (typeof inner.message === "string") message = inner.message;
  } else if (body && typeof body.code === "string") {
    reason = body.code;
    if (typeof body.message === "string") message = body.message;
    for (const [k, v] of Object.entries(body))
      if (k !== "code" && k !== "message" && typeof v === "string") metadata[k] = v;
  }
  const retryAfter = headers.get("retry-after");
  if (retryAfter && metadata.retry_after === undefined) metadata.retry_after = retryAfter;
  const trailer = new Headers();
  if (retryAfter) trailer.set("retry-after", retryAfter);
  return new ConnectError(message, code as number as ConnectCode, trailer, [
    { desc: ErrorInfoSchema, value: { reason, domain: PLATFORM_ERROR_DOMAIN, metadata } },
  ]);
}

/** An error the client raises itself, shaped like the services' (ErrorInfo with a client reason). */
export function clientError(code: Code, reason: string, message: string, cause?: unknown): ConnectError {
  return new ConnectError(
    message,
    code as number as ConnectCode,
    undefined,
    [{ desc: ErrorInfoSchema, value: { reason, domain: CLIENT_ERROR_DOMAIN, metadata: {} } }],
    cause,
  );
}

/**
 * Anything a call threw as the platform's one error type: a PlatformError
 * passes through; a ConnectError (from this client's REST transport, or from
 * a Connect or gRPC transport to a service) gives its code, message, and its
 * ErrorInfo's reason and metadata (`extra`; `http_status` becomes
 * `httpStatus`; a `retry-after` header or trailer becomes
 * `extra.retry_after`); anything else is `unknown`, kept as `cause`.
 */
export function toPlatformError(err: unknown): PlatformError {
  if (err instanceof PlatformError) return err;
  const ce = ConnectError.from(err);
  const code = ce.code as number as Code;
  const info = ce.findDetails(ErrorInfoSchema)[0];
  const extra: Record<string, string> = {};
  let httpStatus: number | undefined;
  for (const [k, v] of Object.entries(info?.metadata ?? {})) {
    if (k !== HTTP_STATUS_KEY) extra[k] = v;
    else if (/^[1-5]\d\d$/.test(v)) httpStatus = Number(v);
  }
  const retryAfter = ce.metadata.get("retry-after");
  if (retryAfter && extra.retry_after === undefined) extra.retry_after = retryAfter;
  return new PlatformError(code, info?.reason || codeName(code), ce.rawMessage, extra, { cause: ce, httpStatus });
}

/** Whether `err` is a PlatformError, with `reason` when one is given. */
export function isPlatformError(err: unknown, reason?: string): err is PlatformError {
  return err instanceof PlatformError && (reason === undefined || err.reason === reason);
}

/** Whether the client raised `err` itself because no answer came (worth a retry for a safe call). */
export function isConnectionFault(err: unknown): boolean {
  const ce = err instanceof ConnectError ? err : err instanceof PlatformError ? err.cause : undefined;
  if (!(ce instanceof ConnectError)) return false;
  const info = ce.findDetails(ErrorInfoSchema)[0];
  return info?.domain === CLIENT_ERROR_DOMAIN && info.reason === ClientReason.unreachable;
}
