import { Code, ConnectError } from "@connectrpc/connect";
import { isPlatformStatus } from "@platform/rpc";

// Statuses that describe the request, not a failure of the platform.
const CALLER_FAULTS = new Set<Code>([
  Code.InvalidArgument,
  Code.NotFound,
  Code.AlreadyExists,
  Code.PermissionDenied,
  Code.FailedPrecondition,
  Code.Aborted,
  Code.OutOfRange,
  Code.ResourceExhausted,
  Code.Unauthenticated,
]);

/**
 * A status a platform service answered about the caller's request (no such
 * session, a malformed message, a busy session): the worker and the router
 * relay it as it is (the router as its HTTP status), where a failure of a
 * service becomes the stream's error event.
 */
export function isCallerFault(err: unknown): boolean {
  return isPlatformStatus(err) && CALLER_FAULTS.has(ConnectError.from(err).code);
}
