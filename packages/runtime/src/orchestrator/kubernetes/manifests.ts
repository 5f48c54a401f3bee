// The Deployment and Service of one tenant worker, built from the
// controller's DeploymentSpec and the cluster's worker template.
import type { V1Deployment, V1ResourceRequirements, V1Service } from "@kubernetes/client-node";
import type { DeploymentSpec } from "../orchestrator.ts";

export const WORKER_PORT = 50051;
export const WORKER_CONTAINER = "worker";
/** Pod label joining a tenant's pods to its Deployment selector and Service. */
export const POD_LABEL = "runtime.platform.io/deployment";

/** What the cluster decides about worker pods (the `runtime-worker-template` ConfigMap). */
export interface WorkerTemplate {
  image: string;
  /** Entry point, when the image's default is not the worker (one image serves every service). */
  command?: string[];
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  resources?: V1ResourceRequirements;
  /** Extra environment (e.g. AGENTS_GRPC_URL) on top of TENANT_ID and ORG_ID. */
  env?: Record<string, string>;
  serviceAccountName?: string;
  /** Extra pod labels (e.g. for NetworkPolicy selectors). */
  podLabels?: Record<string, string>;
}

export function podLabels(name: string, template: WorkerTemplate): Record<string, string> {
  return { ...(template.podLabels ?? {}), "app.kubernetes.io/name": "runtime-worker", [POD_LABEL]: name };
}

export function buildDeployment(spec: DeploymentSpec, template: WorkerTemplate): V1Deployment {
  const labels = podLabels(spec.name, template);
  // Services listen on 127.0.0.1 unless told otherwise; a pod must answer on its own address.
  const env = { HOST: "0.0.0.0", ...(template.env ?? {}), ...spec.env };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: spec.name, labels: spec.labels, annotations: spec.annotations },
    spec: {
      replicas: spec.replicas,
      selector: { matchLabels: { [POD_LABEL]: spec.name } },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          serviceAccountName: template.serviceAccountName,
          enableServiceLinks: false,
          securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: WORKER_CONTAINER,
              image: template.image,
              command: template.command,
              imagePullPolicy: template.imagePullPolicy,
              ports: [{ name: "grpc", containerPort: WORKER_PORT, protocol: "TCP" }],
              env: Object.entries(env).map(([name, value]) => ({ name, value })),
              readinessProbe: { grpc: { port: WORKER_PORT, service: "runtime.v1.RuntimeService" }, periodSeconds: 2, failureThreshold: 3 },
              livenessProbe: { grpc: { port: WORKER_PORT }, periodSeconds: 10, failureThreshold: 3 },
              resources: template.resources,
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ["ALL"] },
              },
              // The root filesystem is read-only; Node and tsx need a writable /tmp.
              volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
            },
          ],
          volumes: [{ name: "tmp", emptyDir: { sizeLimit: "256Mi" } }],
        },
      },
    },
  };
}

export function buildService(spec: DeploymentSpec): V1Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: spec.name, labels: spec.labels, annotations: spec.serviceAnnotations },
    spec: {
      type: "ClusterIP",
      selector: { [POD_LABEL]: spec.name },
      ports: [{ name: "grpc", port: WORKER_PORT, targetPort: WORKER_PORT, protocol: "TCP", appProtocol: "grpc" }],
    },
  };
}
