import type { DescMethod } from "@bufbuild/protobuf";
import { AuthReason, IdentityRestCode, PlatformError } from "@platform/errors";
import { AuthService } from "@platform/gen/identity/v1/auth_pb";
import { SessionService } from "@platform/gen/identity/v1/rest_pb";
import type { InputRefusal } from "@platform/rpc";

/**
 * Identity's answers to a request string holding U+0000 or a lone surrogate
 * (refused by @platform/rpc before any handler) where the specification
 * names one for the case: such a credential or kid cannot exist, so the
 * caller gets what any unknown one gets. Everything else stays the default
 * 400 `invalid_request`.
 */
const byMethod = new Map<DescMethod, () => ReturnType<InputRefusal>>([
  [AuthService.method.getPublicKey, () => PlatformError.notFound("signing key not found", AuthReason.kidUnknown)],
  [AuthService.method.verifyJWT, () => PlatformError.unauthenticated("invalid token", AuthReason.invalidCredentials)],
  [
    AuthService.method.verifyAPIKey,
    () => PlatformError.unauthenticated("invalid API key", AuthReason.invalidCredentials),
  ],
  [
    AuthService.method.verifyToken,
    () => PlatformError.unauthenticated("missing or invalid credential", AuthReason.invalidCredentials),
  ],
  [
    SessionService.method.refresh,
    () => PlatformError.unauthenticated("refresh token is invalid", IdentityRestCode.refreshTokenInvalid),
  ],
  // Logout always answers 204; its handler only hashes the token.
  [SessionService.method.logout, () => "handler"],
]);

export const identityInputRefusal: InputRefusal = (method) => byMethod.get(method)?.();
