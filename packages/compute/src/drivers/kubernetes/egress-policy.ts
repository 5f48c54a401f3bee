// The NetworkPolicy of a Kubernetes sandbox with a network policy (issue 21):
// its one way out is the egress proxy's pods.
import type { V1NetworkPolicy } from "@kubernetes/client-node";
import { SANDBOX_PROXY_PORT } from "../../egress/proxy-env.ts";
import { Label, MANAGED_BY, podName } from "./objects.ts";

/** The label of the egress proxy's pods (its own Deployment). */
export const EGRESS_PROXY_LABELS = { "app.kubernetes.io/name": "egress-proxy" } as const;

export const egressPolicyName = (sandboxId: string) => `${podName(sandboxId)}-egress`;

/**
 * Selects exactly the sandbox's pod (by its sandbox-id label); no ingress;
 * egress only to the egress proxy's pods on TCP 3128. No DNS (the proxy
 * resolves names), no ipBlock: everything else, the cluster, the node, the
 * cloud metadata endpoint and the internet, is unreachable, whatever the
 * namespace's other policies allow (NetworkPolicies only add, so the
 * namespace's own `sandboxes` policy must not allow more for this to hold).
 */
export function buildEgressPolicy(sandboxId: string): V1NetworkPolicy {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: {
      name: egressPolicyName(sandboxId),
      labels: { [Label.managedBy]: MANAGED_BY, [Label.component]: "sandbox", [Label.sandboxId]: sandboxId },
    },
    spec: {
      podSelector: { matchLabels: { [Label.sandboxId]: sandboxId } },
      policyTypes: ["Ingress", "Egress"],
      ingress: [],
      egress: [
        {
          to: [{ podSelector: { matchLabels: { ...EGRESS_PROXY_LABELS } } }],
          ports: [{ protocol: "TCP", port: SANDBOX_PROXY_PORT }],
        },
      ],
    },
  };
}
