export { Code, codeName, httpStatusOf } from "./code.ts";
export { PlatformError, type ErrorExtra } from "./platform-error.ts";
export { AgentsCode, AuthReason, ComputeReason, ErrorAction, IdentityRestCode, InternalReason } from "./reasons.ts";
