import { EdgeCode, IdentityRestCode } from "@platform/errors";
import { type Envelope, reasonEnvelope } from "@platform/rpc";

/**
 * Identity's REST error body, `{"code": "<reason>", "message": ..., ...extra}`
 * (the specification's identity table): an error raised without a specific
 * reason says one of identity's shared codes, and the transport's own faults
 * say identity's names for them.
 */
export const identityEnvelope: Envelope = reasonEnvelope("identity", {
  defaults: {
    invalid_argument: IdentityRestCode.invalidRequest,
    failed_precondition: IdentityRestCode.invalidRequest,
    out_of_range: IdentityRestCode.invalidRequest,
    unauthenticated: IdentityRestCode.unauthenticated,
    permission_denied: IdentityRestCode.insufficientRole,
    not_found: IdentityRestCode.resourceNotFound,
    internal: IdentityRestCode.internal,
    unknown: IdentityRestCode.internal,
  },
  faults: {
    not_found: IdentityRestCode.resourceNotFound,
    method_not_allowed: IdentityRestCode.methodNotAllowed,
    payload_too_large: IdentityRestCode.payloadTooLarge,
    unsupported_media_type: IdentityRestCode.unsupportedMediaType,
    origin_not_allowed: EdgeCode.originNotAllowed,
    invalid_request: IdentityRestCode.invalidRequest,
  },
  internal: IdentityRestCode.internal,
});
