// The resource types the double serves, with the defaulting and validation
// the real API server applies to them (a subset: what the platform's
// adapters send, plus the checks that catch common client mistakes).
import { isIP } from "node:net";
import { parseQuantity } from "./quantity.ts";
import { type Cause, dns1035Label, dns1123Label, dns1123Subdomain } from "./validation.ts";

// biome-ignore lint/suspicious/noExplicitAny: API objects are untyped JSON here
export type KubeObject = Record<string, any> & { metadata: Record<string, any> };

export interface ResourceDef {
  group: string;
  version: string;
  plural: string;
  kind: string;
  /** What DELETE answers with: the object (pods, services, PVCs) or a Success Status (deployments). */
  deleteReturns: "object" | "status";
  /** Main-resource writes keep the stored status (it has a status subresource). */
  hasStatus: boolean;
  /** Bump metadata.generation when spec changes. */
  tracksGeneration: boolean;
  validateName(name: string): Cause[];
  defaults?(obj: KubeObject, ctx: DefaultsContext): void;
  validate?(obj: KubeObject): Cause[];
  validateUpdate?(next: KubeObject, old: KubeObject): Cause[];
}

export interface DefaultsContext {
  allocateClusterIP(): string;
  defaultStorageClass: string | undefined;
}

const stableJson = (v: unknown): string =>
  JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort()) : x,
  );

function validateResources(field: string, r: KubeObject | undefined): Cause[] {
  const causes: Cause[] = [];
  for (const kind of ["requests", "limits"] as const) {
    for (const [name, q] of Object.entries(r?.[kind] ?? {})) {
      if (parseQuantity(q as string) === undefined)
        causes.push({
          field: `${field}.${kind}[${name}]`,
          message: `Invalid value: ${JSON.stringify(q)}: must be a valid quantity`,
        });
    }
  }
  for (const [name, q] of Object.entries(r?.requests ?? {})) {
    const limit = r?.limits?.[name];
    if (limit !== undefined && (parseQuantity(q as string) ?? 0) > (parseQuantity(limit) ?? Number.POSITIVE_INFINITY)) {
      causes.push({
        field: `${field}.requests`,
        message: `Invalid value: ${JSON.stringify(q)}: must be less than or equal to ${name} limit of ${limit}`,
      });
    }
  }
  return causes;
}

function validatePodSpec(field: string, spec: KubeObject | undefined): Cause[] {
  if (!spec) return [{ field, message: "Required value" }];
  const causes: Cause[] = [];
  const containers: KubeObject[] = spec.containers ?? [];
  if (containers.length === 0) causes.push({ field: `${field}.containers`, message: "Required value" });
  const volumes = new Set((spec.volumes ?? []).map((v: KubeObject) => v.name));
  containers.forEach((c, i) => {
    const f = `${field}.containers[${i}]`;
    causes.push(...dns1123Label(`${f}.name`, c.name));
    if (!c.image) causes.push({ field: `${f}.image`, message: "Required value" });
    causes.push(...validateResources(`${f}.resources`, c.resources));
    for (const m of c.volumeMounts ?? []) {
      if (!volumes.has(m.name))
        causes.push({ field: `${f}.volumeMounts.name`, message: `Not found: ${JSON.stringify(m.name)}` });
      if (typeof m.mountPath !== "string" || !m.mountPath.startsWith("/"))
        causes.push({ field: `${f}.volumeMounts.mountPath`, message: "Required value" });
    }
  });
  const deadline = spec.activeDeadlineSeconds;
  if (deadline !== undefined && (!Number.isInteger(deadline) || deadline <= 0)) {
    causes.push({
      field: `${field}.activeDeadlineSeconds`,
      message: `Invalid value: ${deadline}: must be between 1 and 2147483647, inclusive`,
    });
  }
  if (spec.restartPolicy && !["Always", "OnFailure", "Never"].includes(spec.restartPolicy)) {
    causes.push({
      field: `${field}.restartPolicy`,
      message: `Unsupported value: ${JSON.stringify(spec.restartPolicy)}`,
    });
  }
  return causes;
}

function defaultPodSpec(spec: KubeObject): void {
  spec.restartPolicy ??= "Always";
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= "ClusterFirst";
  spec.schedulerName ??= "default-scheduler";
  spec.serviceAccountName ??= "default";
  spec.securityContext ??= {};
  for (const c of spec.containers ?? []) {
    c.terminationMessagePath ??= "/dev/termination-log";
    c.terminationMessagePolicy ??= "File";
    c.imagePullPolicy ??= /:latest$|^[^:]*$/.test(c.image ?? "") ? "Always" : "IfNotPresent";
    // The API server copies limits into unset requests.
    if (c.resources?.limits) {
      c.resources.requests = { ...c.resources.limits, ...(c.resources.requests ?? {}) };
    }
  }
}

function qosClass(spec: KubeObject): string {
  const cs: KubeObject[] = spec.containers ?? [];
  const all = cs.every(
    (c) =>
      c.resources?.limits?.cpu &&
      c.resources?.limits?.memory &&
      stableJson(c.resources.limits) === stableJson(c.resources.requests ?? {}),
  );
  if (all) return "Guaranteed";
  const any = cs.some(
    (c) => Object.keys(c.resources?.requests ?? {}).length || Object.keys(c.resources?.limits ?? {}).length,
  );
  return any ? "Burstable" : "BestEffort";
}

const pods: ResourceDef = {
  group: "",
  version: "v1",
  plural: "pods",
  kind: "Pod",
  deleteReturns: "object",
  hasStatus: true,
  tracksGeneration: false,
  validateName: (n) => dns1123Subdomain("metadata.name", n),
  defaults(obj) {
    defaultPodSpec(obj.spec ?? {});
    obj.status = { phase: "Pending", qosClass: qosClass(obj.spec ?? {}) };
  },
  validate: (obj) => validatePodSpec("spec", obj.spec),
  validateUpdate(next, old) {
    // Pods are immutable except a few fields (image, activeDeadlineSeconds, tolerations).
    const mask = (s: KubeObject) => {
      const c = structuredClone(s ?? {});
      for (const x of c.containers ?? []) delete x.image;
      delete c.activeDeadlineSeconds;
      delete c.tolerations;
      return stableJson(c);
    };
    if (mask(next.spec) !== mask(old.spec)) {
      return [
        {
          field: "spec",
          message:
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations)",
        },
      ];
    }
    return [];
  },
};

const persistentVolumeClaims: ResourceDef = {
  group: "",
  version: "v1",
  plural: "persistentvolumeclaims",
  kind: "PersistentVolumeClaim",
  deleteReturns: "object",
  hasStatus: true,
  tracksGeneration: false,
  validateName: (n) => dns1123Subdomain("metadata.name", n),
  defaults(obj, ctx) {
    obj.spec ??= {};
    obj.spec.volumeMode ??= "Filesystem";
    if (obj.spec.storageClassName === undefined && ctx.defaultStorageClass)
      obj.spec.storageClassName = ctx.defaultStorageClass;
    obj.spec.volumeName = `pvc-${obj.metadata.uid}`;
    // The storage-object-in-use protection finalizer the API server adds.
    obj.metadata.finalizers = [...new Set([...(obj.metadata.finalizers ?? []), "kubernetes.io/pvc-protection"])];
    obj.status = {
      phase: "Bound",
      accessModes: obj.spec.accessModes,
      capacity: { storage: obj.spec.resources?.requests?.storage },
    };
  },
  validate(obj) {
    const causes: Cause[] = [];
    if (!Array.isArray(obj.spec?.accessModes) || obj.spec.accessModes.length === 0)
      causes.push({ field: "spec.accessModes", message: "Required value: at least 1 access mode is required" });
    const storage = obj.spec?.resources?.requests?.storage;
    if (storage === undefined) causes.push({ field: "spec.resources[storage]", message: "Required value" });
    else if (parseQuantity(storage) === undefined || (parseQuantity(storage) ?? 0) <= 0)
      causes.push({
        field: "spec.resources[storage]",
        message: `Invalid value: ${JSON.stringify(storage)}: must be greater than zero`,
      });
    return causes;
  },
  validateUpdate(next, old) {
    const mask = (s: KubeObject) => {
      const c = structuredClone(s ?? {});
      delete c.resources;
      return stableJson(c);
    };
    if (mask(next.spec) !== mask(old.spec)) {
      return [
        {
          field: "spec",
          message:
            "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        },
      ];
    }
    return [];
  },
};

const services: ResourceDef = {
  group: "",
  version: "v1",
  plural: "services",
  kind: "Service",
  deleteReturns: "object",
  hasStatus: true,
  tracksGeneration: false,
  validateName: (n) => dns1035Label("metadata.name", n),
  defaults(obj, ctx) {
    obj.spec ??= {};
    obj.spec.type ??= "ClusterIP";
    obj.spec.sessionAffinity ??= "None";
    if (obj.spec.clusterIP === undefined || obj.spec.clusterIP === "") obj.spec.clusterIP = ctx.allocateClusterIP();
    obj.spec.clusterIPs = [obj.spec.clusterIP];
    obj.spec.ipFamilies = ["IPv4"];
    obj.spec.ipFamilyPolicy = "SingleStack";
    obj.spec.internalTrafficPolicy ??= "Cluster";
    for (const p of obj.spec.ports ?? []) {
      p.protocol ??= "TCP";
      p.targetPort ??= p.port;
    }
    obj.status = { loadBalancer: {} };
  },
  validate(obj) {
    const ports: KubeObject[] = obj.spec?.ports ?? [];
    const causes: Cause[] = [];
    if (ports.length === 0 && obj.spec?.clusterIP !== "None")
      causes.push({ field: "spec.ports", message: "Required value" });
    ports.forEach((p, i) => {
      if (!Number.isInteger(p.port) || p.port < 1 || p.port > 65535)
        causes.push({
          field: `spec.ports[${i}].port`,
          message: `Invalid value: ${p.port}: must be between 1 and 65535, inclusive`,
        });
      if (ports.length > 1 && !p.name) causes.push({ field: `spec.ports[${i}].name`, message: "Required value" });
    });
    return causes;
  },
  validateUpdate(next, old) {
    if (
      next.spec?.clusterIP !== undefined &&
      next.spec.clusterIP !== "" &&
      next.spec.clusterIP !== old.spec?.clusterIP
    ) {
      return [{ field: "spec.clusterIP", message: "Invalid value: field is immutable" }];
    }
    // A PUT that omits clusterIP keeps the allocated one.
    next.spec.clusterIP = old.spec?.clusterIP;
    next.spec.clusterIPs = old.spec?.clusterIPs;
    return [];
  },
};

const configMaps: ResourceDef = {
  group: "",
  version: "v1",
  plural: "configmaps",
  kind: "ConfigMap",
  deleteReturns: "status",
  hasStatus: false,
  tracksGeneration: false,
  validateName: (n) => dns1123Subdomain("metadata.name", n),
};

function selectorMatchesTemplate(obj: KubeObject): boolean {
  const want: Record<string, string> = obj.spec?.selector?.matchLabels ?? {};
  const have: Record<string, string> = obj.spec?.template?.metadata?.labels ?? {};
  return Object.keys(want).length > 0 && Object.entries(want).every(([k, v]) => have[k] === v);
}

const deployments: ResourceDef = {
  group: "apps",
  version: "v1",
  plural: "deployments",
  kind: "Deployment",
  deleteReturns: "status",
  hasStatus: true,
  tracksGeneration: true,
  validateName: (n) => dns1123Subdomain("metadata.name", n),
  defaults(obj) {
    obj.spec ??= {};
    obj.spec.replicas ??= 1;
    obj.spec.strategy ??= { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" } };
    obj.spec.revisionHistoryLimit ??= 10;
    obj.spec.progressDeadlineSeconds ??= 600;
    if (obj.spec.template?.spec) defaultPodSpec(obj.spec.template.spec);
    obj.status = {};
  },
  validate(obj) {
    const causes: Cause[] = [];
    if (!obj.spec?.selector) causes.push({ field: "spec.selector", message: "Required value" });
    else if (!selectorMatchesTemplate(obj))
      causes.push({
        field: "spec.template.metadata.labels",
        message: "Invalid value: `selector` does not match template `labels`",
      });
    const r = obj.spec?.replicas;
    if (r !== undefined && (!Number.isInteger(r) || r < 0))
      causes.push({ field: "spec.replicas", message: `Invalid value: ${r}: must be greater than or equal to 0` });
    causes.push(...validatePodSpec("spec.template.spec", obj.spec?.template?.spec));
    return causes;
  },
  validateUpdate(next, old) {
    if (stableJson(next.spec?.selector) !== stableJson(old.spec?.selector)) {
      return [{ field: "spec.selector", message: "Invalid value: field is immutable" }];
    }
    return [];
  },
};

const POLICY_TYPES = new Set(["Ingress", "Egress"]);
const PROTOCOLS = new Set(["TCP", "UDP", "SCTP"]);

function validatePeers(field: string, peers: unknown): Cause[] {
  if (peers === undefined) return [];
  if (!Array.isArray(peers)) return [{ field, message: "Invalid value: must be a list" }];
  const causes: Cause[] = [];
  peers.forEach((p: KubeObject, i) => {
    const f = `${field}[${i}]`;
    if (p.ipBlock && (p.podSelector || p.namespaceSelector))
      causes.push({ field: f, message: "Invalid value: may not specify both ipBlock and another peer" });
    else if (!p.ipBlock && !p.podSelector && !p.namespaceSelector)
      causes.push({ field: f, message: "Required value: must specify a peer" });
    if (p.ipBlock) {
      const cidr = String(p.ipBlock.cidr ?? "");
      if (!validCidr(cidr))
        causes.push({ field: `${f}.ipBlock.cidr`, message: `Invalid value: ${JSON.stringify(cidr)}: must be a CIDR` });
      for (const [j, e] of (p.ipBlock.except ?? []).entries())
        if (!validCidr(String(e)))
          causes.push({ field: `${f}.ipBlock.except[${j}]`, message: `Invalid value: ${JSON.stringify(e)}` });
    }
  });
  return causes;
}

function validatePorts(field: string, ports: unknown): Cause[] {
  if (ports === undefined) return [];
  if (!Array.isArray(ports)) return [{ field, message: "Invalid value: must be a list" }];
  const causes: Cause[] = [];
  ports.forEach((p: KubeObject, i) => {
    if (p.protocol !== undefined && !PROTOCOLS.has(p.protocol))
      causes.push({
        field: `${field}[${i}].protocol`,
        message: `Unsupported value: ${JSON.stringify(p.protocol)}: supported values: "SCTP", "TCP", "UDP"`,
      });
    if (typeof p.port === "number" && !(Number.isInteger(p.port) && p.port >= 1 && p.port <= 65535))
      causes.push({ field: `${field}[${i}].port`, message: `Invalid value: ${p.port}: must be between 1 and 65535` });
  });
  return causes;
}

function validCidr(cidr: string): boolean {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(cidr);
  if (!m) return false;
  const bits = isIP(m[1] as string);
  return bits !== 0 && Number(m[2]) <= (bits === 4 ? 32 : 128);
}

const networkPolicies: ResourceDef = {
  group: "networking.k8s.io",
  version: "v1",
  plural: "networkpolicies",
  kind: "NetworkPolicy",
  deleteReturns: "status",
  hasStatus: false,
  tracksGeneration: true,
  validateName: (n) => dns1123Subdomain("metadata.name", n),
  defaults(obj) {
    obj.spec ??= {};
    // As the API server: Ingress always, Egress when egress rules are given.
    obj.spec.policyTypes ??= obj.spec.egress ? ["Ingress", "Egress"] : ["Ingress"];
  },
  validate(obj) {
    const causes: Cause[] = [];
    const spec = obj.spec ?? {};
    if (!spec.podSelector || typeof spec.podSelector !== "object")
      causes.push({ field: "spec.podSelector", message: "Required value" });
    for (const [i, t] of (spec.policyTypes ?? []).entries())
      if (!POLICY_TYPES.has(t))
        causes.push({
          field: `spec.policyTypes[${i}]`,
          message: `Unsupported value: ${JSON.stringify(t)}: supported values: "Egress", "Ingress"`,
        });
    for (const [i, r] of (spec.ingress ?? []).entries()) {
      causes.push(...validatePeers(`spec.ingress[${i}].from`, r.from));
      causes.push(...validatePorts(`spec.ingress[${i}].ports`, r.ports));
    }
    for (const [i, r] of (spec.egress ?? []).entries()) {
      causes.push(...validatePeers(`spec.egress[${i}].to`, r.to));
      causes.push(...validatePorts(`spec.egress[${i}].ports`, r.ports));
    }
    return causes;
  },
};

export const RESOURCES: ResourceDef[] = [
  pods,
  persistentVolumeClaims,
  services,
  configMaps,
  deployments,
  networkPolicies,
];

/** The resource the double serves at group/version/plural, if any. */
export function findResource(group: string, version: string, plural: string): ResourceDef | undefined {
  return RESOURCES.find((r) => r.group === group && r.version === version && r.plural === plural);
}

/** `group/version`, or just the version for the core group. */
export function apiVersionOf(def: ResourceDef): string {
  return def.group ? `${def.group}/${def.version}` : def.version;
}
