export { Code, codeName, httpStatusOf } from "./code.ts";
export { PlatformError, type ErrorExtra } from "./platform-error.ts";
export {
  AgentsCode,
  AuthReason,
  ComputeReason,
  EdgeCode,
  ErrorAction,
  IdentityRestCode,
  InternalReason,
} from "./reasons.ts";
export { isUuid, requireUuid } from "./uuid.ts";
