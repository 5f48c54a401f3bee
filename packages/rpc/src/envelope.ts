import type { JsonObject } from "@bufbuild/protobuf";
import { Code, codeName, httpStatusOf, IdentityRestCode, PlatformError } from "@platform/errors";
import { boundText } from "./error-bounds.ts";

/** Faults the transcoder detects before any handler runs. */
export type TransportFault =
  | "not_found"
  | "method_not_allowed"
  | "payload_too_large"
  | "unsupported_media_type"
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

export type EnvelopeName = "identity" | "agents" | "runtime";

const faultCodes: Record<TransportFault, [Code, number]> = {
  not_found: [Code.NotFound, 404],
  method_not_allowed: [Code.Unimplemented, 405],
  payload_too_large: [Code.InvalidArgument, 413],
  unsupported_media_type: [Code.InvalidArgument, 415],
  invalid_request: [Code.InvalidArgument, 400],
};

export function statusOf(err: PlatformError): number {
  return err.httpStatus ?? httpStatusOf(err.code);
}

// Internal errors never show their message: it may be a driver's text.
function safeMessage(err: PlatformError): string {
  return err.code === Code.Internal || err.code === Code.Unknown ? "internal error" : boundText(err.message);
}

/** `{"error": {"code": "<connect code name>", "message": ...}}` (agents, runtime). */
function codeNameEnvelope(name: string): Envelope {
  return {
    name,
    fault(kind, message) {
      const [code, status] = faultCodes[kind];
      return new PlatformError(code, codeName(code), message, {}, { httpStatus: status });
    },
    render(err) {
      const code = err.code === Code.Unknown ? Code.Internal : err.code;
      return { status: statusOf(err), body: { error: { code: codeName(code), message: safeMessage(err) } } };
    },
  };
}

// An error raised without a specific reason carries its code name; identity's
// table names those shared cases differently.
const identityDefaults: Partial<Record<string, string>> = {
  invalid_argument: IdentityRestCode.invalidRequest,
  failed_precondition: IdentityRestCode.invalidRequest,
  out_of_range: IdentityRestCode.invalidRequest,
  unauthenticated: IdentityRestCode.unauthenticated,
  permission_denied: IdentityRestCode.insufficientRole,
  not_found: IdentityRestCode.resourceNotFound,
  internal: IdentityRestCode.internal,
  unknown: IdentityRestCode.internal,
};

const identityFaults: Record<TransportFault, string> = {
  not_found: IdentityRestCode.resourceNotFound,
  method_not_allowed: IdentityRestCode.methodNotAllowed,
  payload_too_large: IdentityRestCode.payloadTooLarge,
  unsupported_media_type: IdentityRestCode.unsupportedMediaType,
  invalid_request: IdentityRestCode.invalidRequest,
};

/** `{"code": "<reason>", "message": ..., ...extra}` (identity). */
const identityEnvelope: Envelope = {
  name: "identity",
  fault(kind, message) {
    const [code, status] = faultCodes[kind];
    return new PlatformError(code, identityFaults[kind], message, {}, { httpStatus: status });
  },
  render(err) {
    const reason = err.reason === codeName(err.code) ? (identityDefaults[err.reason] ?? err.reason) : err.reason;
    const internal = err.code === Code.Internal || err.code === Code.Unknown;
    const body: JsonObject = internal
      ? { code: IdentityRestCode.internal, message: "internal error" }
      : { ...err.extra, code: reason, message: boundText(err.message) };
    return { status: statusOf(err), body };
  },
};

export function envelopeOf(e: EnvelopeName | Envelope): Envelope {
  if (typeof e !== "string") return e;
  switch (e) {
    case "identity":
      return identityEnvelope;
    case "agents":
      return codeNameEnvelope("agents");
    case "runtime":
      return codeNameEnvelope("runtime");
  }
  throw new Error(`unknown envelope "${e as string}"`);
}
