// The Orchestrator port on a Kubernetes cluster: one Deployment and one
// Service per tenant, scaled through the deployments/scale subresource,
// annotated with strategic merge patches, listed by label selector.
import { readFileSync } from "node:fs";
import {
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
} from "@kubernetes/client-node";
import type { Deployment, DeploymentSpec, Orchestrator } from "../orchestrator.ts";
import { apiStatus, toOrchestratorError } from "./api-errors.ts";
import { buildDeployment, buildService, WORKER_PORT, type WorkerTemplate } from "./manifests.ts";

export interface KubernetesOrchestratorOptions {
  kubeConfig: KubeConfig;
  /** Namespace of the tenant workers (the router's own, usually). */
  namespace: string;
  template: WorkerTemplate;
  /** Cluster DNS domain for endpoints. Default "cluster.local". */
  clusterDomain?: string;
  /**
   * Workers serve mutual TLS with the template's Secret and endpoints are
   * https (default); false (INTERNAL_TLS=off) is for development clusters.
   */
  internalTls?: boolean;
  /** Environment the router gives every worker (its OTEL_* settings), over the template's. */
  workerEnv?: Record<string, string>;
}

const strategic = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);
const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** Reads the worker template JSON (the `runtime-worker-template` ConfigMap mounted as a file). */
export function loadWorkerTemplate(path: string): WorkerTemplate {
  const t = JSON.parse(readFileSync(path, "utf8")) as WorkerTemplate;
  if (typeof t.image !== "string" || t.image === "") throw new Error(`${path}: "image" is required`);
  if (t.command !== undefined && (!Array.isArray(t.command) || !t.command.every((c) => typeof c === "string"))) {
    throw new Error(`${path}: "command" must be an array of strings`);
  }
  if (t.tlsSecretName !== undefined && (typeof t.tlsSecretName !== "string" || t.tlsSecretName === "")) {
    throw new Error(`${path}: "tlsSecretName" must be a Secret name`);
  }
  for (const [name, ref] of Object.entries(t.secretEnv ?? {})) {
    if (typeof ref?.secret !== "string" || ref.secret === "" || typeof ref.key !== "string" || ref.key === "") {
      throw new Error(`${path}: "secretEnv.${name}" must be {"secret": <Secret name>, "key": <key>}`);
    }
  }
  return t;
}

function toDeployment(d: V1Deployment): Deployment {
  return {
    name: d.metadata?.name ?? "",
    replicas: d.spec?.replicas ?? 1,
    readyReplicas: d.status?.readyReplicas ?? 0,
    labels: { ...(d.metadata?.labels ?? {}) },
    annotations: { ...(d.metadata?.annotations ?? {}) },
  };
}

export class KubernetesOrchestrator implements Orchestrator {
  private readonly apps: AppsV1Api;
  private readonly core: CoreV1Api;
  private readonly namespace: string;

  constructor(private readonly options: KubernetesOrchestratorOptions) {
    this.apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.namespace = options.namespace;
  }

  async getDeployment(name: string): Promise<Deployment | undefined> {
    try {
      return toDeployment(await this.apps.readNamespacedDeployment({ name, namespace: this.namespace }));
    } catch (err) {
      if (apiStatus(err)?.code === 404) return undefined;
      throw toOrchestratorError(err, `get deployment ${name}`);
    }
  }

  async createDeployment(spec: DeploymentSpec): Promise<Deployment> {
    // The Service first: when the Deployment exists its Service does too, so a
    // caller that sees already_exists can use the endpoint at once. A Service
    // left by a half-finished earlier create is reused.
    try {
      await this.core.createNamespacedService({ namespace: this.namespace, body: buildService(spec) });
    } catch (err) {
      const s = apiStatus(err);
      if (!(s?.code === 409 && s.reason === "AlreadyExists"))
        throw toOrchestratorError(err, `create service ${spec.name}`);
    }
    try {
      return toDeployment(
        await this.apps.createNamespacedDeployment({
          namespace: this.namespace,
          body: buildDeployment(spec, this.options.template, {
            internalTls: this.options.internalTls,
            env: this.options.workerEnv,
          }),
        }),
      );
    } catch (err) {
      throw toOrchestratorError(err, `create deployment ${spec.name}`);
    }
  }

  async scaleDeployment(name: string, replicas: number): Promise<void> {
    try {
      await this.apps.patchNamespacedDeploymentScale(
        { name, namespace: this.namespace, body: { spec: { replicas } } },
        merge,
      );
    } catch (err) {
      throw toOrchestratorError(err, `scale deployment ${name}`);
    }
  }

  async patchAnnotations(name: string, patch: Record<string, string | null>): Promise<void> {
    try {
      await this.apps.patchNamespacedDeployment(
        { name, namespace: this.namespace, body: { metadata: { annotations: patch } } },
        strategic,
      );
    } catch (err) {
      throw toOrchestratorError(err, `annotate deployment ${name}`);
    }
  }

  async listDeployments(selector: Record<string, string>): Promise<Deployment[]> {
    const labelSelector = Object.entries(selector)
      .map(([k, v]) => `${k}=${v}`)
      .join(",");
    try {
      const list = await this.apps.listNamespacedDeployment({ namespace: this.namespace, labelSelector });
      return list.items.map(toDeployment);
    } catch (err) {
      throw toOrchestratorError(err, `list deployments ${labelSelector}`);
    }
  }

  async deleteDeployment(name: string): Promise<void> {
    const ignoreMissing = (what: string) => (err: unknown) => {
      if (apiStatus(err)?.code !== 404) throw toOrchestratorError(err, what);
    };
    // Background propagation: the ReplicaSet and pods go after the Deployment.
    await this.apps
      .deleteNamespacedDeployment({ name, namespace: this.namespace, propagationPolicy: "Background" })
      .catch(ignoreMissing(`delete deployment ${name}`));
    await this.core
      .deleteNamespacedService({ name, namespace: this.namespace })
      .catch(ignoreMissing(`delete service ${name}`));
  }

  async endpoint(name: string): Promise<string | undefined> {
    if (!(await this.getDeployment(name))) return undefined;
    const scheme = this.options.internalTls === false ? "http" : "https";
    return `${scheme}://${name}.${this.namespace}.svc.${this.options.clusterDomain ?? "cluster.local"}:${WORKER_PORT}`;
  }
}
