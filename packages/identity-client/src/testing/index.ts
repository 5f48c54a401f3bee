export { type Caller, IdentityDouble, type IdentityDoubleOptions } from "./identity-double.ts";
