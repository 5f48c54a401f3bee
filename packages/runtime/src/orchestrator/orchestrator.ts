/**
 * The port the runtime controller drives: the small part of a Kubernetes
 * Deployment + Service pair it needs. The local orchestrator (worker
 * processes) and the Kubernetes orchestrator both implement it and both pass
 * `orchestratorContract` from `@platform/runtime/testing`.
 *
 * A "deployment" here always means the Deployment and its Service together:
 * they share one name, are created together and deleted together.
 */
export interface Orchestrator {
  /** The deployment, or undefined when it does not exist. */
  getDeployment(name: string): Promise<Deployment | undefined>;
  /**
   * Creates the Deployment and its Service. Throws an OrchestratorError of
   * kind `already_exists` when a deployment of that name exists (also when
   * another caller created it concurrently).
   */
  createDeployment(spec: DeploymentSpec): Promise<Deployment>;
  /** Sets the desired replica count. `not_found` when absent. */
  scaleDeployment(name: string, replicas: number): Promise<void>;
  /**
   * Merges annotations into the Deployment's (a merge patch: keys given are
   * set, a null value removes the key, other keys stay). `not_found` when
   * absent.
   */
  patchAnnotations(name: string, patch: Record<string, string | null>): Promise<void>;
  /** Deployments whose labels include every pair of the selector. */
  listDeployments(selector: Record<string, string>): Promise<Deployment[]>;
  /** Deletes the Deployment and its Service. Absent is not an error. */
  deleteDeployment(name: string): Promise<void>;
  /**
   * Base URL of the deployment's gRPC port (`http://host:port`, for a
   * Connect gRPC transport), or undefined when the deployment does not exist.
   * Stable while the deployment exists; reachability is the caller's concern
   * (gRPC health).
   */
  endpoint(name: string): Promise<string | undefined>;
  /** Releases resources (the local orchestrator stops its workers). */
  close?(): Promise<void>;
}

export interface DeploymentSpec {
  name: string;
  /** Initial desired replicas (the controller creates at 1). */
  replicas: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** Annotations of the Service (the spec puts tenant-id on both). */
  serviceAnnotations: Record<string, string>;
  /** Environment of the worker container (TENANT_ID, ORG_ID). */
  env: Record<string, string>;
}

export interface Deployment {
  name: string;
  /** Desired replicas (spec.replicas). */
  replicas: number;
  /** Replicas that pass their readiness check (status.readyReplicas). */
  readyReplicas: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/**
 * - `already_exists`: create found the name taken.
 * - `not_found`: scale/patch of an absent deployment.
 * - `transient`: the orchestrator could not answer now (API server
 *   unreachable, 5xx, 429, conflict on update); the caller may retry.
 */
export type OrchestratorErrorKind = "already_exists" | "not_found" | "transient";

export class OrchestratorError extends Error {
  override name = "OrchestratorError";
  readonly kind: OrchestratorErrorKind;
  constructor(kind: OrchestratorErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.kind = kind;
  }
}

export function isAlreadyExists(err: unknown): boolean {
  return err instanceof OrchestratorError && err.kind === "already_exists";
}
export function isNotFound(err: unknown): boolean {
  return err instanceof OrchestratorError && err.kind === "not_found";
}
export function isTransient(err: unknown): boolean {
  return err instanceof OrchestratorError && err.kind === "transient";
}
