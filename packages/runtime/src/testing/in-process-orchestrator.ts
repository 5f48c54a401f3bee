import type { ServiceTls } from "@platform/rpc";
import { MemoryOrchestrator } from "../orchestrator/memory/memory-orchestrator.ts";
import type { Deployment, DeploymentSpec, Orchestrator } from "../orchestrator/orchestrator.ts";
import { freePort } from "../orchestrator/local/free-port.ts";
import { type RunningServer, startWorker } from "../worker/worker.ts";

/**
 * An orchestrator for router tests: deployments are records (a
 * MemoryOrchestrator), and a deployment with replicas runs a real tenant
 * worker server in this process, on a port fixed at creation. `startDelayMs`
 * makes wakes slow; `broken` makes workers never start. With `workerTls`
 * (a runtime-worker certificate) the workers serve mutual TLS (https).
 */
export class InProcessOrchestrator implements Orchestrator {
  readonly records = new MemoryOrchestrator();
  readonly #ports = new Map<string, number>();
  readonly #workers = new Map<string, Promise<RunningServer | undefined>>();
  startDelayMs = 0;
  /** When set, worker starts wait for it (a wake the test releases). */
  gate?: Promise<void>;
  broken = false;
  /** Worker starts so far. */
  starts = 0;

  constructor(
    private readonly agentsUrl: string,
    private readonly workerTls?: ServiceTls,
  ) {}

  async getDeployment(name: string): Promise<Deployment | undefined> {
    return this.records.getDeployment(name);
  }
  async createDeployment(spec: DeploymentSpec): Promise<Deployment> {
    const d = await this.records.createDeployment(spec);
    this.#ports.set(spec.name, await freePort("127.0.0.1"));
    await this.#reconcile(spec.name);
    return d;
  }
  async scaleDeployment(name: string, replicas: number): Promise<void> {
    await this.records.scaleDeployment(name, replicas);
    await this.#reconcile(name);
  }
  patchAnnotations(name: string, patch: Record<string, string | null>): Promise<void> {
    return this.records.patchAnnotations(name, patch);
  }
  listDeployments(selector: Record<string, string>): Promise<Deployment[]> {
    return this.records.listDeployments(selector);
  }
  async deleteDeployment(name: string): Promise<void> {
    await this.records.deleteDeployment(name);
    await this.#reconcile(name);
    this.#ports.delete(name);
  }
  async endpoint(name: string): Promise<string | undefined> {
    const port = this.#ports.get(name);
    return port === undefined ? undefined : `${this.workerTls ? "https" : "http"}://127.0.0.1:${port}`;
  }

  /** Stops a worker behind the orchestrator's back (a crash). */
  async crash(name: string): Promise<void> {
    const w = await this.#workers.get(name);
    this.#workers.delete(name);
    await w?.close();
  }

  async close(): Promise<void> {
    for (const name of [...this.#workers.keys()]) await this.crash(name);
  }

  async #reconcile(name: string): Promise<void> {
    const d = await this.records.getDeployment(name);
    if (!d || d.replicas === 0) {
      await this.crash(name);
      return;
    }
    if (this.#workers.has(name) || this.broken) return;
    const spec = this.records.specOf(name)!;
    const port = this.#ports.get(name)!;
    this.starts++;
    // Like a pod, the worker comes up in the background.
    const started = (async () => {
      await new Promise((r) => setTimeout(r, this.startDelayMs));
      await this.gate;
      if (!this.#workers.has(name)) return undefined;
      return startWorker({
        tenantId: spec.env.TENANT_ID!,
        orgId: spec.env.ORG_ID!,
        agentsUrl: this.agentsUrl,
        port,
        host: "127.0.0.1",
        tls: this.workerTls,
      });
    })();
    this.#workers.set(name, started);
  }
}
