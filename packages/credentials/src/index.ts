export {
  type BearerCredential,
  type ParsedAuthorization,
  parseAuthorization,
  parseCredentialField,
} from "./authorization.ts";
export {
  type CredentialKind,
  credentialKind,
  isApiKeyFormat,
  isCompactJws,
  MAX_CREDENTIAL_CHARS,
} from "./credential-shape.ts";
export { open, seal } from "./seal.ts";
