// The Deployment and Service of one tenant worker, built from the
// controller's DeploymentSpec and the cluster's worker template.
import type { V1Deployment, V1ResourceRequirements, V1Service, V1Volume, V1VolumeMount } from "@kubernetes/client-node";
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
  /**
   * Environment read from Secrets (e.g. METRICS_TOKEN), rendered as optional
   * secretKeyRefs: the value never appears in the Deployment object.
   */
  secretEnv?: Record<string, { secret: string; key: string }>;
  serviceAccountName?: string;
  /** Extra pod labels (e.g. for NetworkPolicy selectors). */
  podLabels?: Record<string, string>;
  /**
   * The Secret holding the workers' certificate (`tls.crt`, `tls.key`,
   * `ca.crt`: cert-manager's layout), mounted into every worker pod.
   * Default `runtime-worker-tls`.
   */
  tlsSecretName?: string;
}

export const DEFAULT_TLS_SECRET = "runtime-worker-tls";
/** Where the worker's TLS Secret is mounted, and the settings naming its files. */
export const TLS_MOUNT = "/etc/platform/tls";
const TLS_ENV = {
  TLS_CA_FILE: `${TLS_MOUNT}/ca.crt`,
  TLS_CERT_FILE: `${TLS_MOUNT}/tls.crt`,
  TLS_KEY_FILE: `${TLS_MOUNT}/tls.key`,
};
/** A gid for the Secret's files (fsGroup), so the key is readable by the worker and nobody else. */
const TLS_GROUP = 10001;

export interface DeploymentOptions {
  /**
   * Serve the worker's gRPC over mutual TLS with the template's Secret
   * (default). false is INTERNAL_TLS=off: development clusters only.
   */
  internalTls?: boolean;
  /** The router's own settings for its workers (OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_*): over the template's env. */
  env?: Record<string, string>;
}

export function podLabels(name: string, template: WorkerTemplate): Record<string, string> {
  return { ...(template.podLabels ?? {}), "app.kubernetes.io/name": "runtime-worker", [POD_LABEL]: name };
}

export function buildDeployment(
  spec: DeploymentSpec,
  template: WorkerTemplate,
  options: DeploymentOptions = {},
): V1Deployment {
  const tls = options.internalTls !== false;
  const labels = podLabels(spec.name, template);
  // Services listen on 127.0.0.1 unless told otherwise; a pod must answer on its own address.
  // The TLS settings come last: a template cannot point a worker elsewhere or turn TLS off.
  const env: Record<string, string> = {
    HOST: "0.0.0.0",
    ...(template.env ?? {}),
    ...(options.env ?? {}),
    ...spec.env,
    ...(tls ? TLS_ENV : { INTERNAL_TLS: "off" }),
  };
  if (tls) delete env.INTERNAL_TLS;
  const fromSecrets = Object.entries(template.secretEnv ?? {})
    .filter(([name]) => !(name in env))
    .map(([name, ref]) => ({ name, valueFrom: { secretKeyRef: { name: ref.secret, key: ref.key, optional: true } } }));
  // The kubelet's gRPC probe cannot present a client certificate, and a TLS
  // worker answers nothing without one: with TLS the probes check that the
  // port is bound (the worker binds it once it serves); the router itself
  // waits for gRPC health over mTLS before it forwards.
  const readinessProbe = tls
    ? { tcpSocket: { port: WORKER_PORT }, periodSeconds: 2, failureThreshold: 3 }
    : { grpc: { port: WORKER_PORT, service: "runtime.v1.RuntimeService" }, periodSeconds: 2, failureThreshold: 3 };
  const livenessProbe = tls
    ? { tcpSocket: { port: WORKER_PORT }, periodSeconds: 10, failureThreshold: 3 }
    : { grpc: { port: WORKER_PORT }, periodSeconds: 10, failureThreshold: 3 };
  const volumeMounts: V1VolumeMount[] = [{ name: "tmp", mountPath: "/tmp" }];
  const volumes: V1Volume[] = [{ name: "tmp", emptyDir: { sizeLimit: "256Mi" } }];
  if (tls) {
    volumeMounts.push({ name: "tls", mountPath: TLS_MOUNT, readOnly: true });
    volumes.push({
      name: "tls",
      secret: { secretName: template.tlsSecretName ?? DEFAULT_TLS_SECRET, defaultMode: 0o440 },
    });
  }
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
          securityContext: {
            runAsNonRoot: true,
            seccompProfile: { type: "RuntimeDefault" },
            ...(tls ? { fsGroup: TLS_GROUP } : {}),
          },
          containers: [
            {
              name: WORKER_CONTAINER,
              image: template.image,
              command: template.command,
              imagePullPolicy: template.imagePullPolicy,
              ports: [{ name: "grpc", containerPort: WORKER_PORT, protocol: "TCP" }],
              env: [...Object.entries(env).map(([name, value]) => ({ name, value })), ...fromSecrets],
              readinessProbe,
              livenessProbe,
              resources: template.resources,
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ["ALL"] },
              },
              // The root filesystem is read-only; Node and tsx need a writable /tmp.
              volumeMounts,
            },
          ],
          volumes,
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
