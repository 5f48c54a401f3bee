export {
  type CidrRule,
  cidrAllows,
  domainAllowed,
  inCidr,
  type NetworkPolicy,
  POLICY_LIMITS,
  parseCidr,
  policyFromJson,
  policyToJson,
  validateNetworkPolicy,
} from "./policy.ts";
