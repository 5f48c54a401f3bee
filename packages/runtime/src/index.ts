// The orchestrator port (implemented by ./orchestrator/local and ./orchestrator/kubernetes).
export {
  type Deployment,
  type DeploymentSpec,
  isAlreadyExists,
  isNotFound,
  isTransient,
  type Orchestrator,
  OrchestratorError,
  type OrchestratorErrorKind,
} from "./orchestrator/orchestrator.ts";
export { LocalOrchestrator, type LocalOrchestratorOptions } from "./orchestrator/local/local-orchestrator.ts";
// The controller library.
export {
  Controller,
  type ControllerOptions,
  type EnsureReadyResult,
  type ScaleState,
  type SweepResult,
} from "./controller/controller.ts";
export { Annotation, Label, MANAGED_BY, TENANT_SELECTOR } from "./controller/labels.ts";
export { ENSURE_BACKOFF_MS, type Sleep } from "./controller/retry.ts";
export { startSweeps, type SweepSchedule } from "./controller/sweeps.ts";
export { candidateShort, deploymentName, tenantShort } from "./controller/tenant-name.ts";
// Servers.
export { startRouter, type RouterOptions, type RunningRouter } from "./router/router.ts";
export type { Authenticator, Principal } from "./router/authenticator.ts";
export { startWorker, type RunningServer } from "./worker/worker.ts";
export type { AgentEvent, AgentsPort } from "./worker/agents-port.ts";
export { type CallIdentity, Metadata } from "./metadata.ts";
export { isServing, waitServing, RUNTIME_SERVICE_NAME } from "./health/grpc-health.ts";
