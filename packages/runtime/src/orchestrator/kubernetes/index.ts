export {
  KubernetesOrchestrator,
  type KubernetesOrchestratorOptions,
  loadWorkerTemplate,
} from "./kubernetes-orchestrator.ts";
export {
  buildDeployment,
  buildService,
  DEFAULT_TLS_SECRET,
  type DeploymentOptions,
  POD_LABEL,
  TLS_MOUNT,
  WORKER_PORT,
  type WorkerTemplate,
} from "./manifests.ts";
