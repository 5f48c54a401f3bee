import { KubeConfig } from "@kubernetes/client-node";
import type { SandboxDriver } from "../../driver.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";

export { KubernetesDriver, type KubernetesDriverOptions, parseContainerUsage } from "./kubernetes-driver.ts";
export { buildClaim, buildPod, claimName, observePod, podName } from "./objects.ts";

/**
 * The driver as the compute service builds it: credentials from the pod's
 * service account (or KUBECONFIG outside a cluster), namespace from
 * COMPUTE_NAMESPACE or the service account's namespace, PVC defaults from
 * PVC_STORAGE_CLASS / PVC_WORKSPACE_SIZE (already parsed into the config).
 */
export async function createKubernetesDriver(options: {
  config: { pvcStorageClass: string; pvcWorkspaceSize: string };
  env?: NodeJS.ProcessEnv;
}): Promise<SandboxDriver> {
  const env = options.env ?? process.env;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const namespace =
    env.COMPUTE_NAMESPACE || kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace || "default";
  const runAsUser = env.SANDBOX_RUN_AS_USER ? Number(env.SANDBOX_RUN_AS_USER) : undefined;
  if (runAsUser !== undefined && (!Number.isInteger(runAsUser) || runAsUser <= 0))
    throw new Error("SANDBOX_RUN_AS_USER must be a positive integer (restricted Pod Security forbids root)");
  return new KubernetesDriver({
    kubeConfig,
    namespace,
    runAsUser,
    defaultStorageClass: options.config.pvcStorageClass,
    defaultSize: options.config.pvcWorkspaceSize,
  });
}
