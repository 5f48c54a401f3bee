// Every machine reason string of the specification and of design.md, defined
// once. Services, the REST envelopes and the tests all import from here.

/** Identity REST error codes (the `code` field of the identity envelope). */
export const IdentityRestCode = {
  invalidRequest: "invalid_request",
  unauthenticated: "unauthenticated",
  insufficientRole: "insufficient_role",
  resourceNotFound: "resource_not_found",
  internal: "internal",
  refreshTokenRequired: "refresh_token_required",
  refreshTokenReused: "refresh_token_reused",
  refreshTokenInvalid: "refresh_token_invalid",
  userIdRequired: "user_id_required",
  userIdInvalid: "user_id_invalid",
  idempotencyKeyRequired: "idempotency_key_required",
  idempotencyKeyMismatch: "idempotency_key_mismatch",
  idempotencyKeyInUse: "idempotency_key_in_use",
  payloadTooLarge: "payload_too_large",
  unsupportedMediaType: "unsupported_media_type",
  methodNotAllowed: "method_not_allowed",
  /** 429 (RESOURCE_EXHAUSTED) + Retry-After: login throttled for the account or the client address. */
  tooManyAttempts: "too_many_attempts",
  /** 503 (UNAVAILABLE) + Retry-After: the password-hashing queue is full. */
  unavailable: "unavailable",
} as const;

/** Identity gRPC reasons, carried as google.rpc.ErrorInfo.reason. */
export const AuthReason = {
  invalidCredentials: "invalid_credentials",
  wrongEnvironment: "wrong_environment",
  noMembership: "no_membership",
  expired: "expired",
  keyRetired: "key_retired",
  notAMember: "not_a_member",
  kidUnknown: "kid_unknown",
} as const;

/** Extra fields the specification attaches to some errors. */
export const ErrorAction = {
  reAuthenticate: "re_authenticate",
} as const;

/** Agents envelope codes: the Connect code names (design.md). */
export const AgentsCode = {
  invalidArgument: "invalid_argument",
  unauthenticated: "unauthenticated",
  notFound: "not_found",
  alreadyExists: "already_exists",
  unavailable: "unavailable",
  internal: "internal",
} as const;

/** Compute reasons, for ErrorInfo details on compute errors. */
export const ComputeReason = {
  invalidArgument: "invalid_argument",
  pathEscapes: "path_escapes_mount",
  symlinkOutside: "symlink_outside_mount",
  sandboxNotRunnable: "sandbox_not_runnable",
  sandboxNotFound: "sandbox_not_found",
  readyTimeout: "ready_timeout",
  payloadTooLarge: "payload_too_large",
  /** INVALID_ARGUMENT: a path over PATH_MAX or a component over NAME_MAX (in the sandbox's view). */
  pathTooLong: "path_too_long",
  /** INVALID_ARGUMENT: ExecCommand's command, args and env over the ARG_MAX-like bounds. */
  argumentsTooLong: "arguments_too_long",
  /** RESOURCE_EXHAUSTED: a write ran into the workspace's size (ENOSPC in its filesystem). */
  workspaceFull: "workspace_full",
} as const;

export type IdentityRestCode = (typeof IdentityRestCode)[keyof typeof IdentityRestCode];
export type AuthReason = (typeof AuthReason)[keyof typeof AuthReason];

/** Reasons of the internal (mutual TLS) listeners, for every service. */
export const InternalReason = {
  /** PERMISSION_DENIED: the caller's certificate names a service that may not call this method. */
  callerNotAllowed: "caller_not_allowed",
} as const;
