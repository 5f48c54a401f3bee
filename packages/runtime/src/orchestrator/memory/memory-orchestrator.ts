import { type Deployment, type DeploymentSpec, type Orchestrator, OrchestratorError } from "../orchestrator.ts";

interface Entry {
  spec: DeploymentSpec;
  replicas: number;
  annotations: Record<string, string>;
}

/**
 * An in-memory Orchestrator for controller and router tests: deployments are
 * records, "ready" follows the desired replicas at once. `failNext` queues
 * errors for the next calls of an operation, to drive retry paths.
 */
export class MemoryOrchestrator implements Orchestrator {
  readonly #items = new Map<string, Entry>();
  readonly #failures = new Map<string, unknown[]>();
  /** Every call, as `op:name`, for assertions on what the controller did. */
  readonly calls: string[] = [];

  constructor(private readonly endpoints: (name: string) => string = (n) => `http://${n}.memory:50051`) {}

  /** Makes the next `count` calls of `op` throw `error` (default: transient). */
  failNext(op: keyof Orchestrator, count = 1, error: unknown = new OrchestratorError("transient", "injected")): void {
    const q = this.#failures.get(op) ?? [];
    for (let i = 0; i < count; i++) q.push(error);
    this.#failures.set(op, q);
  }

  #enter(op: string, name: string): void {
    this.calls.push(`${op}:${name}`);
    const q = this.#failures.get(op);
    if (q && q.length > 0) throw q.shift();
  }

  #view(e: Entry): Deployment {
    return {
      name: e.spec.name,
      replicas: e.replicas,
      readyReplicas: e.replicas,
      labels: { ...e.spec.labels },
      annotations: { ...e.annotations },
    };
  }

  #must(name: string): Entry {
    const e = this.#items.get(name);
    if (!e) throw new OrchestratorError("not_found", `deployment ${name} not found`);
    return e;
  }

  async getDeployment(name: string): Promise<Deployment | undefined> {
    this.#enter("getDeployment", name);
    const e = this.#items.get(name);
    return e && this.#view(e);
  }

  async createDeployment(spec: DeploymentSpec): Promise<Deployment> {
    this.#enter("createDeployment", spec.name);
    if (this.#items.has(spec.name)) throw new OrchestratorError("already_exists", `deployment ${spec.name} exists`);
    const e: Entry = { spec: structuredClone(spec), replicas: spec.replicas, annotations: { ...spec.annotations } };
    this.#items.set(spec.name, e);
    return this.#view(e);
  }

  async scaleDeployment(name: string, replicas: number): Promise<void> {
    this.#enter("scaleDeployment", name);
    this.#must(name).replicas = replicas;
  }

  async patchAnnotations(name: string, patch: Record<string, string | null>): Promise<void> {
    this.#enter("patchAnnotations", name);
    const e = this.#must(name);
    for (const [k, v] of Object.entries(patch)) {
      if (v === null) delete e.annotations[k];
      else e.annotations[k] = v;
    }
  }

  async listDeployments(selector: Record<string, string>): Promise<Deployment[]> {
    this.#enter("listDeployments", "");
    return [...this.#items.values()]
      .filter((e) => Object.entries(selector).every(([k, v]) => e.spec.labels[k] === v))
      .map((e) => this.#view(e));
  }

  async deleteDeployment(name: string): Promise<void> {
    this.#enter("deleteDeployment", name);
    this.#items.delete(name);
  }

  async endpoint(name: string): Promise<string | undefined> {
    this.#enter("endpoint", name);
    return this.#items.has(name) ? this.endpoints(name) : undefined;
  }

  /** The Service annotations and env the deployment was created with. */
  specOf(name: string): DeploymentSpec | undefined {
    const e = this.#items.get(name);
    return e && structuredClone(e.spec);
  }
}
