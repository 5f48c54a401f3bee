// The in-process API-server double: a plain-HTTP server on 127.0.0.1 that
// answers the Kubernetes REST paths the platform's adapters use, with the
// real server's status codes and Status bodies, plus the simulated parts of
// the control plane they depend on (pods start, deadlines, deployment status,
// PVC protection) and pods/exec over WebSocket running real processes.
import { mkdtempSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { type ExecSession, handleExecUpgrade } from "./exec.ts";
import { PATCH_TYPES, type PatchType } from "./patch.ts";
import { type PodSandbox, removeDir, startPodSandbox, stopPodSandbox } from "./pod-runtime.ts";
import { apiVersionOf, findResource, type KubeObject, type ResourceDef } from "./resources.ts";
import { restrictedViolations } from "./pod-security.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { StatusError, statusErrors, successStatus } from "./status.ts";
import { Store } from "./store.ts";

export interface KubeDoubleOptions {
  /** Namespaces that exist (creates elsewhere are 404 like on a cluster). Default ["default"]. */
  namespaces?: string[];
  /**
   * Pods move to Running this long after creation, once every PVC they
   * mount exists ("scheduling"). null: only when a test calls runPod().
   * Default 20 ms.
   */
  podStartDelayMs?: number | null;
  /**
   * Graceful pod deletion: a deleted pod first shows metadata.deletionTimestamp
   * (its containers are stopped at once) and disappears this long after, as
   * when the kubelet confirms termination. 0 removes it at once. Default 50 ms.
   */
  podTerminationMs?: number;
  /** Storage class stamped on PVCs that name none (the cluster default). Default "standard". */
  defaultStorageClass?: string;
  /** "immediate": readyReplicas follows spec.replicas; "manual": stays as set by setDeploymentReady. */
  deploymentReadiness?: "immediate" | "manual";
  /** Run pods' containers for exec (needs bwrap and nsenter). Default true. */
  runContainers?: boolean;
  /**
   * Namespaces labelled pod-security.kubernetes.io/enforce=restricted: pods
   * violating the restricted standard are refused with 403 Forbidden, as the
   * PodSecurity admission plugin does. Default: every namespace.
   */
  restrictedNamespaces?: string[];
}

export interface RecordedRequest {
  method: string;
  path: string;
  contentType: string | undefined;
}

type Target = {
  def: ResourceDef;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
};

const CORE = "/api/v1";

/** An API-server double on 127.0.0.1 for the Kubernetes adapters' tests: the REST verbs (no watch: adapters poll with list), pods/exec and optionally real pods in bubblewrap. */
export class KubeDouble {
  readonly store: Store;
  /** Every request, for tests that assert which verb and patch type an adapter used. */
  readonly requests: RecordedRequest[] = [];
  private server!: Server;
  private port = 0;
  private readonly namespaces: Set<string>;
  private readonly dataDir = mkdtempSync(join(tmpdir(), "kube-double-"));
  private readonly sandboxes = new Map<string, Promise<PodSandbox | undefined>>();
  private readonly timers = new Map<string, NodeJS.Timeout[]>();
  private readonly execs = new Set<ExecSession>();
  private nextIp = 1;

  private constructor(private readonly options: KubeDoubleOptions) {
    this.namespaces = new Set(options.namespaces ?? ["default"]);
    this.store = new Store({
      allocateClusterIP: () => `10.96.${Math.floor(this.nextIp / 250)}.${(this.nextIp++ % 250) + 1}`,
      defaultStorageClass: options.defaultStorageClass ?? "standard",
    });
    this.store.onChange = (def, ns, name, obj, old) => this.react(def, ns, name, obj, old);
  }

  static async start(options: KubeDoubleOptions = {}): Promise<KubeDouble> {
    const d = new KubeDouble(options);
    d.server = createServer((req, res) => {
      d.handle(req, res).catch((err) => d.sendError(res, err));
    });
    d.server.on("upgrade", (req, socket, head) => {
      handleExecUpgrade(d, req, socket, head);
    });
    await new Promise<void>((resolve) => d.server.listen(0, "127.0.0.1", resolve));
    d.port = (d.server.address() as AddressInfo).port;
    return d;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** A KubeConfig pointing at the double, its context set to `namespace`. */
  kubeConfig(namespace = "default"): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "double", server: this.url, skipTLSVerify: true }],
      users: [{ name: "double" }],
      contexts: [{ name: "double", cluster: "double", user: "double", namespace }],
      currentContext: "double",
    });
    return kc;
  }

  async close(): Promise<void> {
    for (const ts of this.timers.values()) for (const t of ts) clearTimeout(t);
    this.timers.clear();
    for (const e of this.execs) e.abort();
    for (const p of this.sandboxes.values()) {
      const s = await p.catch(() => undefined);
      if (s) stopPodSandbox(s);
    }
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    removeDir(this.dataDir);
  }

  createNamespace(name: string): void {
    this.namespaces.add(name);
  }

  // ---- test controls -------------------------------------------------------

  resource(plural: string, group = ""): ResourceDef {
    const def = findResource(group, group === "" ? "v1" : "v1", plural);
    if (!def) throw new Error(`unknown resource ${plural}`);
    return def;
  }

  /** The stored object (with kind/apiVersion), or undefined. */
  get(
    plural: string,
    namespace: string,
    name: string,
    group = plural === "deployments" ? "apps" : "",
  ): KubeObject | undefined {
    const def = this.resource(plural, group);
    const o = this.store.get(def, namespace, name);
    return o && this.store.present(def, o);
  }

  list(plural: string, namespace?: string, group = plural === "deployments" ? "apps" : ""): KubeObject[] {
    return this.store.list(this.resource(plural, group), namespace);
  }

  /** Moves a pod to Running with its containers running and ready (what the kubelet reports). */
  async runPod(namespace: string, name: string): Promise<void> {
    const pods = this.resource("pods");
    const pod = this.store.get(pods, namespace, name);
    if (pod?.status?.phase !== "Pending") return;
    if (this.options.runContainers !== false) {
      const key = `${namespace}/${name}`;
      if (!this.sandboxes.has(key)) {
        const started = startPodSandbox(join(this.dataDir, "pods", pod.metadata.uid), this.mountsOf(pod)).catch(
          (err) => {
            this.setPodPhase(namespace, name, "Failed", { reason: "ContainerCannotRun", message: String(err) });
            return undefined;
          },
        );
        this.sandboxes.set(key, started);
        if (!(await started)) return;
      }
    }
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const running = this.store.writeStatus(pods, namespace, name, (p) => {
      p.status = {
        ...p.status,
        phase: "Running",
        startTime: now,
        hostIP: "192.168.0.10",
        podIP: `10.244.0.${(this.nextIp++ % 250) + 1}`,
        conditions: ["PodScheduled", "Initialized", "ContainersReady", "Ready"].map((type) => ({
          type,
          status: "True",
          lastTransitionTime: now,
        })),
        containerStatuses: (p.spec.containers ?? []).map((c: KubeObject) => ({
          name: c.name,
          image: c.image,
          imageID: `docker.io/library/${c.image}@sha256:0`,
          containerID: `containerd://${p.metadata.uid.replaceAll("-", "")}`,
          ready: true,
          started: true,
          restartCount: 0,
          state: { running: { startedAt: now } },
        })),
      };
    });
    const deadline = running?.spec?.activeDeadlineSeconds;
    if (deadline) {
      this.addTimer(`${namespace}/${name}`, deadline * 1000, () => {
        this.terminatePod(
          namespace,
          name,
          "Failed",
          { reason: "DeadlineExceeded", message: "Pod was active on the node longer than the specified deadline" },
          { exitCode: 137, reason: "Error" },
        );
      });
    }
  }

  /** Sets a pod's phase (and optional reason/message), as the kubelet would report it. */
  setPodPhase(
    namespace: string,
    name: string,
    phase: "Pending" | "Running" | "Succeeded" | "Failed",
    extra: { reason?: string; message?: string } = {},
  ): void {
    if (phase === "Succeeded" || phase === "Failed") {
      this.terminatePod(namespace, name, phase, extra, {
        exitCode: phase === "Succeeded" ? 0 : 1,
        reason: phase === "Succeeded" ? "Completed" : "Error",
      });
      return;
    }
    this.store.writeStatus(this.resource("pods"), namespace, name, (p) => {
      p.status = { ...p.status, phase, ...extra };
    });
  }

  /**
   * Ends a pod's main container (e.g. `{exitCode: 137, reason: "OOMKilled"}`);
   * with restartPolicy Never the pod becomes Failed (non-zero) or Succeeded.
   */
  terminateContainer(
    namespace: string,
    name: string,
    term: { exitCode: number; reason?: string; message?: string },
  ): void {
    const pod = this.store.get(this.resource("pods"), namespace, name);
    if (!pod) return;
    const phase = term.exitCode === 0 ? "Succeeded" : "Failed";
    this.terminatePod(
      namespace,
      name,
      phase,
      {},
      {
        exitCode: term.exitCode,
        reason: term.reason ?? (term.exitCode === 0 ? "Completed" : "Error"),
        message: term.message,
      },
    );
  }

  /** Sets status.readyReplicas (and availableReplicas) of a Deployment. */
  setDeploymentReady(namespace: string, name: string, readyReplicas: number): void {
    this.store.writeStatus(this.resource("deployments", "apps"), namespace, name, (d) => {
      d.status = {
        ...d.status,
        readyReplicas: readyReplicas || undefined,
        availableReplicas: readyReplicas || undefined,
      };
    });
  }

  /** Host directory holding a PVC's data (what a volume plugin would provision). */
  pvcDir(namespace: string, claim: string): string | undefined {
    const pvc = this.store.get(this.resource("persistentvolumeclaims"), namespace, claim);
    return pvc && join(this.dataDir, "pvcs", pvc.metadata.uid);
  }

  // ---- used by the exec handler -------------------------------------------

  async podSandbox(namespace: string, name: string): Promise<PodSandbox | undefined> {
    return this.sandboxes.get(`${namespace}/${name}`);
  }

  trackExec(session: ExecSession): () => void {
    this.execs.add(session);
    return () => this.execs.delete(session);
  }

  // ---- simulated controllers ----------------------------------------------

  private addTimer(key: string, ms: number, fn: () => void): void {
    const t = setTimeout(fn, ms);
    t.unref();
    const list = this.timers.get(key) ?? [];
    list.push(t);
    this.timers.set(key, list);
  }

  private clearTimers(key: string): void {
    for (const t of this.timers.get(key) ?? []) clearTimeout(t);
    this.timers.delete(key);
  }

  private mountsOf(pod: KubeObject) {
    const volumes = new Map<string, KubeObject>((pod.spec.volumes ?? []).map((v: KubeObject) => [v.name, v]));
    const c = pod.spec.containers[0];
    const mounts = [];
    for (const m of c.volumeMounts ?? []) {
      const v = volumes.get(m.name);
      let hostPath: string | undefined;
      if (v?.persistentVolumeClaim) hostPath = this.pvcDir(pod.metadata.namespace, v.persistentVolumeClaim.claimName);
      else if (v?.emptyDir) hostPath = join(this.dataDir, "pods", pod.metadata.uid, "volumes", m.name);
      if (hostPath)
        mounts.push({
          hostPath,
          mountPath: m.mountPath,
          readOnly: Boolean(m.readOnly || v?.persistentVolumeClaim?.readOnly),
        });
    }
    return mounts;
  }

  private claimsOf(pod: KubeObject): string[] {
    return (pod.spec?.volumes ?? []).flatMap((v: KubeObject) =>
      v.persistentVolumeClaim ? [v.persistentVolumeClaim.claimName] : [],
    );
  }

  private terminatePod(
    namespace: string,
    name: string,
    phase: "Failed" | "Succeeded",
    extra: { reason?: string; message?: string },
    term: { exitCode: number; reason: string; message?: string },
  ): void {
    const key = `${namespace}/${name}`;
    this.clearTimers(key);
    this.stopSandbox(key);
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    this.store.writeStatus(this.resource("pods"), namespace, name, (p) => {
      const restart = p.spec.restartPolicy ?? "Always";
      const final =
        restart === "Never" || (restart === "OnFailure" && term.exitCode === 0) || extra.reason === "DeadlineExceeded";
      p.status = {
        ...p.status,
        phase: final ? phase : p.status.phase,
        ...extra,
        conditions: (p.status.conditions ?? []).map((c: KubeObject) =>
          c.type === "Ready" || c.type === "ContainersReady" ? { ...c, status: "False", lastTransitionTime: now } : c,
        ),
        containerStatuses: (
          p.status.containerStatuses ??
          (p.spec.containers ?? []).map((c: KubeObject) => ({ name: c.name, image: c.image, restartCount: 0 }))
        ).map((cs: KubeObject) => ({
          ...cs,
          ready: false,
          started: false,
          state: {
            terminated: {
              exitCode: term.exitCode,
              reason: term.reason,
              message: term.message,
              startedAt: cs.state?.running?.startedAt ?? now,
              finishedAt: now,
              containerID: cs.containerID,
            },
          },
        })),
      };
    });
  }

  private stopSandbox(key: string): void {
    const s = this.sandboxes.get(key);
    this.sandboxes.delete(key);
    s?.then((sb) => sb && stopPodSandbox(sb)).catch(() => {});
  }

  /** Reactions of the control plane to a write: the scheduler/kubelet for pods, PVC protection, the deployment controller. */
  private react(
    def: ResourceDef,
    ns: string,
    name: string,
    obj: KubeObject | undefined,
    old: KubeObject | undefined,
  ): void {
    if (def.plural === "pods") {
      if (!obj) {
        this.clearTimers(`${ns}/${name}`);
        this.stopSandbox(`${ns}/${name}`);
        // PVC protection: a claim marked for deletion goes once no pod uses it.
        for (const claim of this.claimsOf(old ?? { metadata: {} })) this.releaseClaim(ns, claim);
      } else if (!old) {
        this.schedule(ns, name);
      }
    } else if (def.plural === "persistentvolumeclaims") {
      if (obj?.metadata.deletionTimestamp && !old?.metadata.deletionTimestamp) this.releaseClaim(ns, name);
      if (!obj && old) removeDir(join(this.dataDir, "pvcs", old.metadata.uid));
      if (obj && !old) {
        // A pod waiting for this claim can now be scheduled.
        for (const pod of this.store.list(this.resource("pods"), ns)) {
          if (pod.status?.phase === "Pending" && this.claimsOf(pod).includes(name))
            this.schedule(ns, pod.metadata.name);
        }
      }
    } else if (
      def.plural === "deployments" &&
      obj &&
      (this.options.deploymentReadiness ?? "immediate") === "immediate"
    ) {
      const replicas = obj.spec.replicas ?? 1;
      const s = obj.status ?? {};
      if (s.observedGeneration !== obj.metadata.generation || (s.replicas ?? 0) !== replicas) {
        this.store.writeStatus(def, ns, name, (d) => {
          d.status = {
            observedGeneration: d.metadata.generation,
            replicas: replicas || undefined,
            updatedReplicas: replicas || undefined,
            readyReplicas: replicas || undefined,
            availableReplicas: replicas || undefined,
          };
        });
      }
    }
  }

  /** Marks the pod terminating, stops its containers, removes it after podTerminationMs. */
  private terminateGracefully(ns: string, name: string, opts: KubeObject | undefined): KubeObject {
    const pods = this.resource("pods");
    const pod = this.store.get(pods, ns, name);
    if (!pod) throw statusErrors.notFound("pods", "", name);
    const pre = opts?.preconditions;
    if (
      (pre?.uid && pre.uid !== pod.metadata.uid) ||
      (pre?.resourceVersion && pre.resourceVersion !== pod.metadata.resourceVersion)
    ) {
      throw statusErrors.conflict("pods", "", name);
    }
    if (pod.metadata.deletionTimestamp) return pod;
    const key = `${ns}/${name}`;
    this.clearTimers(key);
    this.stopSandbox(key);
    const grace = opts?.gracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? 30;
    const marked = this.store.writeStatus(pods, ns, name, (p) => {
      p.metadata.deletionTimestamp = new Date(Date.now() + grace * 1000).toISOString().replace(/\.\d+Z$/, "Z");
      p.metadata.deletionGracePeriodSeconds = grace;
    });
    this.addTimer(key, this.options.podTerminationMs ?? 50, () => {
      try {
        this.store.delete(pods, ns, name);
      } catch {}
    });
    return marked ?? pod;
  }

  private schedule(ns: string, name: string): void {
    const delay = this.options.podStartDelayMs === undefined ? 20 : this.options.podStartDelayMs;
    if (delay === null) return;
    const pod = this.store.get(this.resource("pods"), ns, name);
    if (!pod) return;
    const pvcs = this.resource("persistentvolumeclaims");
    // Unschedulable until every claim it mounts exists (and is not being deleted).
    if (
      !this.claimsOf(pod).every(
        (c) => this.store.get(pvcs, ns, c) && !this.store.get(pvcs, ns, c)?.metadata.deletionTimestamp,
      )
    )
      return;
    this.addTimer(`${ns}/${name}`, delay, () => {
      this.runPod(ns, name).catch(() => {});
    });
  }

  private releaseClaim(ns: string, claim: string): void {
    const pvcs = this.resource("persistentvolumeclaims");
    const pvc = this.store.get(pvcs, ns, claim);
    if (!pvc?.metadata.deletionTimestamp) return;
    const inUse = this.store.list(this.resource("pods"), ns).some((p) => this.claimsOf(p).includes(claim));
    if (!inUse) this.store.removeFinalizer(pvcs, ns, claim, "kubernetes.io/pvc-protection");
  }

  // ---- HTTP ----------------------------------------------------------------

  /** Parses an API path; undefined when it names no served resource. */
  parsePath(pathname: string): Target | undefined {
    const parts = pathname.split("/").filter(Boolean).map(decodeURIComponent);
    let group: string;
    let version: string;
    let rest: string[];
    if (parts[0] === "api" && parts[1] === "v1") {
      group = "";
      version = "v1";
      rest = parts.slice(2);
    } else if (parts[0] === "apis" && parts.length >= 3) {
      group = parts[1];
      version = parts[2];
      rest = parts.slice(3);
    } else return undefined;
    let namespace: string | undefined;
    if (rest[0] === "namespaces" && rest.length >= 3) {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const def = findResource(group, version, rest[0] ?? "");
    if (!def || rest.length > 3) return undefined;
    return { def, namespace, name: rest[1], subresource: rest[2] };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://double");
    const method = req.method ?? "GET";
    this.requests.push({ method, path: url.pathname + url.search, contentType: req.headers["content-type"] });
    if (url.pathname === "/version")
      return this.send(res, 200, { major: "1", minor: "31", gitVersion: "v1.31.0-kube-double" });
    if (url.pathname.startsWith(`${CORE}/namespaces/`) && url.pathname.split("/").length === 5) {
      const ns = decodeURIComponent(url.pathname.split("/")[4]);
      if (method !== "GET") throw statusErrors.methodNotAllowed();
      if (!this.namespaces.has(ns)) throw statusErrors.notFound("namespaces", "", ns);
      return this.send(res, 200, {
        kind: "Namespace",
        apiVersion: "v1",
        metadata: { name: ns },
        status: { phase: "Active" },
      });
    }
    const target = this.parsePath(url.pathname);
    if (!target) {
      return this.send(res, 404, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: "the server could not find the requested resource",
        reason: "NotFound",
        details: {},
        code: 404,
      });
    }
    const { def, namespace, name, subresource } = target;
    if (namespace !== undefined && !this.namespaces.has(namespace) && method === "POST") {
      throw statusErrors.notFound("namespaces", "", namespace);
    }
    if (namespace === undefined && (method !== "GET" || name !== undefined)) throw statusErrors.methodNotAllowed();
    const body = ["POST", "PUT", "PATCH", "DELETE"].includes(method) ? await readBody(req) : "";

    if (name === undefined) {
      if (method === "GET") return this.send(res, 200, this.listResponse(def, namespace, url.searchParams));
      if (method === "POST") {
        const obj = parseJson(body, req.headers["content-type"]);
        this.checkBody(def, obj, namespace as string);
        this.admitPod(def, obj, namespace as string);
        const created = this.store.create(def, namespace as string, obj, url.searchParams.get("dryRun") === "All");
        return this.send(res, 201, this.store.present(def, created));
      }
      if (method === "DELETE") {
        const match = parseLabelSelector(url.searchParams.get("labelSelector"));
        const deleted = this.store.list(def, namespace).filter((o) => match(o.metadata.labels));
        for (const o of deleted) this.store.delete(def, o.metadata.namespace, o.metadata.name);
        return this.send(res, 200, {
          kind: `${def.kind}List`,
          apiVersion: apiVersionOf(def),
          metadata: { resourceVersion: this.store.currentResourceVersion() },
          items: deleted,
        });
      }
      throw statusErrors.methodNotAllowed();
    }
    const ns = namespace as string;

    if (subresource === "scale" && def.plural === "deployments")
      return this.handleScale(res, def, ns, name, method, body, req.headers["content-type"]);
    if (subresource === "exec" && def.plural === "pods") throw statusErrors.badRequest("Upgrade request required");
    if (subresource !== undefined && subresource !== "status")
      throw statusErrors.notFound(`${def.plural}/${subresource}`, def.group, name);
    const part = subresource === "status" ? "status" : "main";

    switch (method) {
      case "GET": {
        const o = this.store.get(def, ns, name);
        if (!o) throw statusErrors.notFound(def.plural, def.group, name);
        return this.send(res, 200, this.store.present(def, o));
      }
      case "PUT": {
        const obj = parseJson(body, req.headers["content-type"]);
        this.checkBody(def, obj, ns);
        return this.send(res, 200, this.store.present(def, this.store.update(def, ns, name, obj, part)));
      }
      case "PATCH": {
        const current = this.store.get(def, ns, name);
        if (!current) throw statusErrors.notFound(def.plural, def.group, name);
        const patched = applyPatch(current, body, req.headers["content-type"]);
        // A resourceVersion in the patch is a precondition; without one the patch applies to the latest.
        if (patched.metadata?.resourceVersion === undefined)
          patched.metadata = { ...patched.metadata, resourceVersion: current.metadata.resourceVersion };
        return this.send(res, 200, this.store.present(def, this.store.update(def, ns, name, patched, part)));
      }
      case "DELETE": {
        const opts = body ? (parseJson(body, "application/json") as KubeObject) : undefined;
        if (def.plural === "pods" && (this.options.podTerminationMs ?? 50) > 0) {
          return this.send(res, 200, this.store.present(def, this.terminateGracefully(ns, name, opts)));
        }
        const deleted = this.store.delete(def, ns, name, opts?.preconditions);
        if (def.deleteReturns === "object") return this.send(res, 200, this.store.present(def, deleted));
        return this.send(
          res,
          200,
          successStatus({ name, group: def.group || undefined, kind: def.plural, uid: deleted.metadata.uid }),
        );
      }
      default:
        throw statusErrors.methodNotAllowed();
    }
  }

  private handleScale(
    res: ServerResponse,
    def: ResourceDef,
    ns: string,
    name: string,
    method: string,
    body: string,
    contentType: string | undefined,
  ): void {
    const d = this.store.get(def, ns, name);
    if (!d) throw statusErrors.notFound(def.plural, def.group, name);
    const toScale = (o: KubeObject) => ({
      kind: "Scale",
      apiVersion: "autoscaling/v1",
      metadata: {
        name,
        namespace: ns,
        uid: o.metadata.uid,
        resourceVersion: o.metadata.resourceVersion,
        creationTimestamp: o.metadata.creationTimestamp,
      },
      spec: { replicas: o.spec.replicas },
      status: {
        replicas: o.status?.replicas ?? 0,
        selector: Object.entries(o.spec.selector?.matchLabels ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(","),
      },
    });
    if (method === "GET") {
      this.send(res, 200, toScale(d));
      return;
    }
    let scale: KubeObject;
    if (method === "PUT") scale = parseJson(body, contentType);
    else if (method === "PATCH") scale = applyPatch(toScale(d), body, contentType);
    else throw statusErrors.methodNotAllowed();
    const replicas = scale.spec?.replicas;
    if (!Number.isInteger(replicas) || replicas < 0) {
      throw statusErrors.invalid("Scale", "autoscaling", name, [
        { field: "spec.replicas", message: `Invalid value: ${replicas}: must be greater than or equal to 0` },
      ]);
    }
    const rv =
      method === "PUT"
        ? scale.metadata?.resourceVersion
        : (scale.metadata?.resourceVersion ?? d.metadata.resourceVersion);
    const next = structuredClone(d);
    next.spec.replicas = replicas;
    next.metadata.resourceVersion = rv || undefined;
    const updated = this.store.update(def, ns, name, next);
    this.send(res, 200, toScale(this.store.get(def, ns, name) ?? updated));
  }

  private admitPod(def: ResourceDef, obj: KubeObject, ns: string): void {
    if (def.plural !== "pods") return;
    const restricted = this.options.restrictedNamespaces ?? [...this.namespaces];
    if (!restricted.includes(ns)) return;
    const violations = restrictedViolations(obj.spec);
    if (violations.length) {
      throw new StatusError({
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: `pods "${obj.metadata?.name ?? ""}" is forbidden: violates PodSecurity "restricted:latest": ${violations.join(", ")}`,
        reason: "Forbidden",
        details: { name: obj.metadata?.name, kind: "pods" },
        code: 403,
      });
    }
  }

  private checkBody(def: ResourceDef, obj: KubeObject, ns: string): void {
    if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersionOf(def)) {
      throw statusErrors.badRequest(
        `the API version in the data (${obj.apiVersion}) does not match the expected API version (${apiVersionOf(def)})`,
      );
    }
    if (obj.kind !== undefined && obj.kind !== def.kind) {
      throw statusErrors.badRequest(
        `the kind in the data (${obj.kind}) does not match the expected kind (${def.kind})`,
      );
    }
    if (obj.metadata?.namespace !== undefined && obj.metadata.namespace !== "" && obj.metadata.namespace !== ns) {
      throw statusErrors.badRequest(
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
  }

  private listResponse(def: ResourceDef, namespace: string | undefined, q: URLSearchParams): KubeObject {
    if (q.get("watch") === "true" || q.get("watch") === "1")
      throw statusErrors.badRequest("watch is not supported by the kube-testing double; poll with list");
    const labels = parseLabelSelector(q.get("labelSelector"));
    const fields = parseFieldSelector(q.get("fieldSelector"));
    const items = this.store.list(def, namespace).filter((o) => labels(o.metadata.labels) && fields(o));
    return {
      kind: `${def.kind}List`,
      apiVersion: apiVersionOf(def),
      metadata: { resourceVersion: this.store.currentResourceVersion() },
      items,
    };
  }

  private send(res: ServerResponse, code: number, body: unknown): void {
    res.writeHead(code, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  }

  private sendError(res: ServerResponse, err: unknown): void {
    const e =
      err instanceof StatusError ? err : statusErrors.internal(err instanceof Error ? err.message : String(err));
    if (res.headersSent) {
      res.destroy();
      return;
    }
    this.send(res, e.code, e.status);
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function parseJson(body: string, contentType: string | undefined): KubeObject {
  const type = (contentType ?? "application/json").split(";")[0].trim();
  if (type !== "application/json" && !type.endsWith("+json")) throw statusErrors.unsupportedMediaType(type);
  try {
    const v = JSON.parse(body);
    if (typeof v !== "object" || v === null) throw new Error("not an object");
    return v;
  } catch (err) {
    throw statusErrors.badRequest(`error decoding request body: ${(err as Error).message}`);
  }
}

function applyPatch(current: KubeObject, body: string, contentType: string | undefined): KubeObject {
  const type = (contentType ?? "").split(";")[0].trim();
  const fn = PATCH_TYPES[type as PatchType];
  if (!fn) throw statusErrors.unsupportedMediaType(type || "(none)");
  let patch: unknown;
  try {
    patch = JSON.parse(body);
  } catch (err) {
    throw statusErrors.badRequest(`error decoding patch: ${(err as Error).message}`);
  }
  // biome-ignore lint/suspicious/noExplicitAny: JSON in, JSON out
  const out = fn(current as any, patch as any);
  if (typeof out !== "object" || out === null || Array.isArray(out))
    throw statusErrors.badRequest("patch result is not an object");
  return out as KubeObject;
}
