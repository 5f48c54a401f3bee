import { Code, codeName } from "./code.ts";

/** Extra string fields rendered next to `code` and `message` (e.g. `action`). */
export type ErrorExtra = Record<string, string>;

/**
 * The one error type of the platform. Domain code throws it; the rpc package
 * carries it on gRPC as a ConnectError with a google.rpc.ErrorInfo detail
 * (reason + extra as metadata) and renders each service's REST envelope from
 * it.
 */
export class PlatformError extends Error {
  override name = "PlatformError";
  readonly code: Code;
  /** Machine reason, e.g. `refresh_token_reused`, `not_found`. */
  readonly reason: string;
  readonly extra: ErrorExtra;
  /**
   * REST status where the contract departs from the standard code table
   * (design.md: 422 idempotency_key_mismatch). Travels on gRPC as ErrorInfo
   * metadata `http_status`.
   */
  readonly httpStatus?: number;

  constructor(
    code: Code,
    reason: string,
    message: string,
    extra: ErrorExtra = {},
    options?: { cause?: unknown; httpStatus?: number },
  ) {
    super(message, options);
    this.code = code;
    this.reason = reason;
    this.extra = extra;
    this.httpStatus = options?.httpStatus;
  }

  /**
   * Coerces anything thrown into a PlatformError. A PlatformError passes
   * through; any other value becomes `internal` with a generic message, so no
   * stack, SQL or secret reaches a response. The original stays as `cause`
   * for the log.
   */
  static from(reason: unknown): PlatformError {
    if (reason instanceof PlatformError) return reason;
    return new PlatformError(Code.Internal, "internal", "internal error", {}, { cause: reason });
  }

  static invalidArgument(message: string, reason = "invalid_argument", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.InvalidArgument, reason, message, extra);
  }
  static notFound(message: string, reason = "not_found", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.NotFound, reason, message, extra);
  }
  static unauthenticated(message: string, reason = "unauthenticated", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.Unauthenticated, reason, message, extra);
  }
  static permissionDenied(message: string, reason = "permission_denied", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.PermissionDenied, reason, message, extra);
  }
  static alreadyExists(message: string, reason = "already_exists", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.AlreadyExists, reason, message, extra);
  }
  static failedPrecondition(message: string, reason = "failed_precondition", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.FailedPrecondition, reason, message, extra);
  }
  static unavailable(message: string, reason = "unavailable", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.Unavailable, reason, message, extra);
  }
  static deadlineExceeded(message: string, reason = "deadline_exceeded", extra?: ErrorExtra): PlatformError {
    return new PlatformError(Code.DeadlineExceeded, reason, message, extra);
  }
  static internal(message = "internal error", cause?: unknown): PlatformError {
    return new PlatformError(Code.Internal, "internal", message, {}, { cause });
  }

  /** The Connect code name (`invalid_argument`, ...). */
  get codeName(): string {
    return codeName(this.code);
  }
}
