import { KubeConfig } from "@kubernetes/client-node";
import type { SandboxDriver } from "../../driver.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";

export { KubernetesDriver, type KubernetesDriverOptions, parseContainerUsage } from "./kubernetes-driver.ts";
export { buildClaim, buildPod, claimName, observePod, podName } from "./objects.ts";

/**
 * The driver as the compute service builds it: credentials from the pod's
 * service account (or KUBECONFIG outside a cluster), namespace from
 * COMPUTE_NAMESPACE or the service account's namespace, PVC defaults and the
 * sandboxes' uid from the settings (parsed into the config at start-up).
 */
export async function createKubernetesDriver(options: {
  config: {
    pvcStorageClass: string;
    pvcWorkspaceSize: string;
    kubernetesNamespace?: string;
    sandboxRunAsUser?: number;
  };
}): Promise<SandboxDriver> {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromDefault();
  const namespace =
    options.config.kubernetesNamespace ||
    kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace ||
    "default";
  return new KubernetesDriver({
    kubeConfig,
    namespace,
    runAsUser: options.config.sandboxRunAsUser,
    defaultStorageClass: options.config.pvcStorageClass,
    defaultSize: options.config.pvcWorkspaceSize,
  });
}
