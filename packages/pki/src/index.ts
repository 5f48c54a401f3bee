export { createCa, type IssueOptions, issueServiceCert, type PemPair, spiffeId } from "./certificates.ts";
export {
  type EnsureOptions,
  type EnsureResult,
  ensurePki,
  SERVICE_NAMES,
  type ServiceName,
  type ServiceTlsFiles,
  serviceTlsFiles,
  tlsEnv,
} from "./directory.ts";
