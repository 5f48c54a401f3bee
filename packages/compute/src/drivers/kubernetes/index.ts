import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import type { SandboxDriver } from "../../driver.ts";
import type { NetworkEventStore } from "../../store/network-event-store.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";

const totals = (events: NetworkEventStore | undefined, id: string) =>
  events ? events.totals(id) : Promise.resolve({ egressBytes: 0, ingressBytes: 0 });

export { KubernetesDriver, type KubernetesDriverOptions, parseContainerUsage } from "./kubernetes-driver.ts";
export { buildClaim, buildPod, claimName, observePod, podName } from "./objects.ts";

/**
 * The proxy's Service as an address: sandbox pods have no DNS (their
 * NetworkPolicy allows the proxy alone; DNS would be a way out), so its name
 * is resolved here, once at start, to the Service's cluster IP (stable while
 * the Service exists; recreating it needs a compute restart).
 */
async function proxyAddress(address: string | undefined): Promise<string | undefined> {
  if (!address) return undefined;
  const i = address.lastIndexOf(":");
  const host = address.slice(0, i);
  if (isIP(host)) return address;
  const resolved = await lookup(host).catch((err) => {
    throw new Error(`COMPUTE_EGRESS_PROXY_ADDRESS: cannot resolve ${host}: ${(err as Error).message}`);
  });
  return `${resolved.address}:${address.slice(i + 1)}`;
}

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
  const egress = await proxyAddress(options.config.egressProxyAddress);
  return new KubernetesDriver({
    kubeConfig,
    namespace,
    runAsUser: options.config.sandboxRunAsUser,
    defaultStorageClass: options.config.pvcStorageClass,
    defaultSize: options.config.pvcWorkspaceSize,
    ...(egress && options.config.egressProxyKey
      ? { egress: { address: egress, key: options.config.egressProxyKey } }
      : {}),
    ...(options.networkEvents ? { networkTotals: (id: string) => totals(options.networkEvents, id) } : {}),
  });
}
