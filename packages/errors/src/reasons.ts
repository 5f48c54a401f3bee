// Every machine reason string of the specification and of design.md, defined
// once. Services, the REST envelopes and the tests all import from here.

/**
 * Codes of HTTP faults found before any handler runs, the same string in
 * every service's envelope on every public port (identity's `code`, agents'
 * and the router's `error.code`).
 */
export const EdgeCode = {
  /** 405 + Allow: the path exists, the method does not. */
  methodNotAllowed: "method_not_allowed",
  /** 413: the body is larger than the service's limit. */
  payloadTooLarge: "payload_too_large",
  /** 415: a body that is not application/json. */
  unsupportedMediaType: "unsupported_media_type",
  /** 403: a CORS preflight from an origin not in the allow-list. */
  originNotAllowed: "origin_not_allowed",
} as const;

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
  payloadTooLarge: EdgeCode.payloadTooLarge,
  unsupportedMediaType: EdgeCode.unsupportedMediaType,
  methodNotAllowed: EdgeCode.methodNotAllowed,
  /** 429 (RESOURCE_EXHAUSTED) + Retry-After: login throttled for the account or the client address. */
  tooManyAttempts: "too_many_attempts",
  /** 503 (UNAVAILABLE) + Retry-After: the password-hashing queue is full. */
  unavailable: "unavailable",
  /** 409: the change would leave the organization without an owner (issue 19). */
  lastOwner: "last_owner",
  /** 409: the invited email already belongs to a member of the organization. */
  alreadyMember: "already_member",
  /** 404: no invitation has this token, or it was revoked. */
  invitationInvalid: "invitation_invalid",
  /** 400: the invitation's expiry has passed. */
  invitationExpired: "invitation_expired",
  /** 409: the invitation was already accepted (single use). */
  invitationUsed: "invitation_used",
  /** 403: the email given on acceptance is not the invited one. */
  invitationEmailMismatch: "invitation_email_mismatch",
  /** 403: self-service sign-up is off (IDENTITY_SIGNUP). */
  signupDisabled: "signup_disabled",
  /** 403: the API key lacks the scope the call needs. */
  insufficientScope: "insufficient_scope",
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
  /** FAILED_PRECONDITION: PauseSandbox while an exec or file call runs on the sandbox. */
  sandboxBusy: "sandbox_busy",
  /** NOT_FOUND: SendExecInput / ResizeExecTerminal naming no exec with input running in that sandbox. */
  execNotFound: "exec_not_found",
  /** ALREADY_EXISTS: an ExecCommand exec_id that a running exec of the sandbox has. */
  execIdInUse: "exec_id_in_use",
  /** RESOURCE_EXHAUSTED: SendExecInput while the exec's buffered input is at its bound. */
  stdinBufferFull: "stdin_buffer_full",
  /** FAILED_PRECONDITION: SendExecInput after the exec's stdin was closed (eof) or the command closed it. */
  stdinClosed: "stdin_closed",
  /** FAILED_PRECONDITION: stdin or a terminal asked of a driver that cannot give an exec input (Kubernetes). */
  execInputUnsupported: "exec_input_unsupported",
} as const;

export type IdentityRestCode = (typeof IdentityRestCode)[keyof typeof IdentityRestCode];
export type AuthReason = (typeof AuthReason)[keyof typeof AuthReason];

/** Reasons of the internal (mutual TLS) listeners, for every service. */
export const InternalReason = {
  /** PERMISSION_DENIED: the caller's certificate names a service that may not call this method. */
  callerNotAllowed: "caller_not_allowed",
} as const;
