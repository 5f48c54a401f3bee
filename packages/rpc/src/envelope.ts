import type { JsonObject } from "@bufbuild/protobuf";
import { Code, codeName, EdgeCode, httpStatusOf, IdentityRestCode, PlatformError } from "@platform/errors";
import { boundText } from "./error-bounds.ts";

/** Faults the transcoder detects before any handler runs. */
export type TransportFault =
  | "not_found"
  | "method_not_allowed"
  | "payload_too_large"
  | "unsupported_media_type"
  | "origin_not_allowed"
  | "invalid_request";

/**
 * How a service writes REST error bodies. `fault` builds the error for a
 * transport-level problem (so identity can say `invalid_request` where agents
 * say `invalid_argument`); `render` turns any PlatformError into status + body.
 */
export interface Envelope {
  name: string;
  fault(kind: TransportFault, message: string): PlatformError;
  render(err: PlatformError): { status: number; body: JsonObject };
}

/** The services whose envelope is the code-name one (each other service registers its own `Envelope`). */
export type EnvelopeName = "agents" | "runtime";

const faultCodes: Record<TransportFault, [Code, number]> = {
  not_found: [Code.NotFound, 404],
  method_not_allowed: [Code.Unimplemented, 405],
  payload_too_large: [Code.InvalidArgument, 413],
  unsupported_media_type: [Code.InvalidArgument, 415],
  origin_not_allowed: [Code.PermissionDenied, 403],
  invalid_request: [Code.InvalidArgument, 400],
};

// HTTP faults with no Connect code of their own: every envelope names them
// the same way (issue 16: one status and one code on every public port).
const edgeCodes = new Set<string>(Object.values(EdgeCode));

/** The HTTP status of a platform error: its own when it carries one, else its code's. */
export function statusOf(err: PlatformError): number {
  return err.httpStatus ?? httpStatusOf(err.code);
}

// Internal errors never show their message: it may be a driver's text.
function safeMessage(err: PlatformError): string {
  return err.code === Code.Internal || err.code === Code.Unknown ? "internal error" : boundText(err.message);
}

/** Reasons every service's envelope shows, whatever its code naming: an API key's missing scope. */
const sharedReasons = new Set<string>([IdentityRestCode.insufficientScope]);

/** `{"error": {"code": "<connect code name>", "message": ...}}` (agents, runtime). */
export function codeNameEnvelope(name: string): Envelope {
  return {
    name,
    fault(kind, message) {
      const [code, status] = faultCodes[kind];
      return new PlatformError(code, edgeCodes.has(kind) ? kind : codeName(code), message, {}, { httpStatus: status });
    },
    render(err) {
      const code = err.code === Code.Unknown ? Code.Internal : err.code;
      // Only the transport's own faults (they carry their HTTP status); a
      // relayed status with such a reason keeps its code name.
      const name = edgeCodes.has(err.reason) && err.httpStatus !== undefined ? err.reason : codeName(code);
      // `code` stays the Connect code name (the contract); a reason callers
      // act on rides beside it, additively (gRPC has it as ErrorInfo.reason).
      const error: JsonObject = { code: name, message: safeMessage(err) };
      if (sharedReasons.has(err.reason)) error.reason = err.reason;
      return { status: statusOf(err), body: { error } };
    },
  };
}

/**
 * How a reason envelope names what it shows: `defaults` renames the reason of
 * an error raised without a specific one (whose reason is its code name, e.g.
 * `not_found`), `faults` names the transport's own faults.
 */
export interface ReasonTable {
  defaults: Partial<Record<string, string>>;
  faults: Record<TransportFault, string>;
  /** The code of every internal/unknown error (its message is always "internal error"). */
  internal: string;
}

/**
 * `{"code": "<reason>", "message": ..., ...extra}`: the reason itself is the
 * code (identity registers one with its table).
 */
export function reasonEnvelope(name: string, table: ReasonTable): Envelope {
  return {
    name,
    fault(kind, message) {
      const [code, status] = faultCodes[kind];
      return new PlatformError(code, table.faults[kind], message, {}, { httpStatus: status });
    },
    render(err) {
      const reason = err.reason === codeName(err.code) ? (table.defaults[err.reason] ?? err.reason) : err.reason;
      const internal = err.code === Code.Internal || err.code === Code.Unknown;
      const body: JsonObject = internal
        ? { code: table.internal, message: "internal error" }
        : { ...err.extra, code: reason, message: boundText(err.message) };
      return { status: statusOf(err), body };
    },
  };
}

/** The envelope a server renders its REST errors in: a registered `Envelope`, or the code-name one of a named service. */
export function envelopeOf(e: EnvelopeName | Envelope): Envelope {
  if (typeof e !== "string") return e;
  switch (e) {
    case "agents":
      return codeNameEnvelope("agents");
    case "runtime":
      return codeNameEnvelope("runtime");
  }
  throw new Error(`unknown envelope "${e as string}"`);
}
