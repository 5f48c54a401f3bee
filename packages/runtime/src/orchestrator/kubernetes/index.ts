export { KubernetesOrchestrator, type KubernetesOrchestratorOptions, loadWorkerTemplate } from "./kubernetes-orchestrator.ts";
export { buildDeployment, buildService, POD_LABEL, WORKER_PORT, type WorkerTemplate } from "./manifests.ts";
