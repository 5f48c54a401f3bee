import { KubeConfig } from "@kubernetes/client-node";
import type { SandboxDriver } from "../../driver.ts";
import type { NetworkEventStore } from "../../store/network-event-store.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";

const totals = (events: NetworkEventStore | undefined, id: string) =>
  events ? events.totals(id) : Promise.resolve({ egressBytes: 0, ingressBytes: 0 });

export { KubernetesDriver, type KubernetesDriverOptions, parseContainerUsage } from "./kubernetes-driver.ts";
export { buildClaim, buildPod, claimName, observePod, podName } from "./objects.ts";

/**
 * The driver as the compute service builds it: credentials from the pod's
 * service account (or KUBECONFIG outside a cluster), namespace from
 * COMPUTE_NAMESPACE or the service account's namespace, PVC defaults and the
 * sandboxes' uid from the settings (parsed into the config at start-up).
 */
export async function createKubernetesDriver(options: {
  /** compute's network events (the egress proxy writes them): the sandboxes' network usage. */
  networkEvents?: NetworkEventStore;
  config: {
    pvcStorageClass: string;
    pvcWorkspaceSize: string;
    kubernetesNamespace?: string;
    sandboxRunAsUser?: number;
    egressProxyAddress?: string;
    egressProxyKey?: Buffer;
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
    ...(options.config.egressProxyAddress && options.config.egressProxyKey
      ? { egress: { address: options.config.egressProxyAddress, key: options.config.egressProxyKey } }
      : {}),
    ...(options.networkEvents ? { networkTotals: (id: string) => totals(options.networkEvents, id) } : {}),
  });
}
