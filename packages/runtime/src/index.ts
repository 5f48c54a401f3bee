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
