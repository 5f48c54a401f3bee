// Objects by resource, namespace and name, with the API server's write
// rules: one global resourceVersion counter, optimistic concurrency on
// writes that carry a resourceVersion, server-owned metadata.
import { randomUUID } from "node:crypto";
import { apiVersionOf, type DefaultsContext, type KubeObject, type ResourceDef } from "./resources.ts";
import { statusErrors } from "./status.ts";
import { annotations, labels } from "./validation.ts";

const key = (ns: string, name: string) => `${ns}/${name}`;
const GENERATE_SUFFIX = "bcdfghjklmnpqrstvwxz2456789";

/** The double's object store: resourceVersions, generateName and change callbacks. */
export class Store {
  private rv = 1000;
  private readonly objects = new Map<ResourceDef, Map<string, KubeObject>>();
  /** Called after every write with the new object (undefined after delete). */
  onChange: (
    def: ResourceDef,
    ns: string,
    name: string,
    obj: KubeObject | undefined,
    old: KubeObject | undefined,
  ) => void = () => {};

  constructor(private readonly ctx: DefaultsContext) {}

  private table(def: ResourceDef): Map<string, KubeObject> {
    let t = this.objects.get(def);
    if (!t) this.objects.set(def, (t = new Map()));
    return t;
  }

  currentResourceVersion(): string {
    return String(this.rv);
  }

  private nextRv(): string {
    return String(++this.rv);
  }

  /** A deep copy with kind and apiVersion, as GET returns it. */
  present(def: ResourceDef, obj: KubeObject): KubeObject {
    return { kind: def.kind, apiVersion: apiVersionOf(def), ...structuredClone(obj) };
  }

  get(def: ResourceDef, ns: string, name: string): KubeObject | undefined {
    const o = this.table(def).get(key(ns, name));
    return o && structuredClone(o);
  }

  list(def: ResourceDef, ns: string | undefined): KubeObject[] {
    return [...this.table(def).entries()]
      .filter(([k]) => ns === undefined || k.startsWith(`${ns}/`))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => structuredClone(o));
  }

  private validateMeta(def: ResourceDef, obj: KubeObject): void {
    const name = obj.metadata.name;
    const causes = [
      ...def.validateName(name),
      ...labels("metadata.labels", obj.metadata.labels),
      ...annotations("metadata.annotations", obj.metadata.annotations),
    ];
    causes.push(...(def.validate?.(obj) ?? []));
    if (causes.length) throw statusErrors.invalid(def.kind, def.group, name ?? "", causes);
  }

  create(def: ResourceDef, ns: string, input: KubeObject, dryRun = false): KubeObject {
    const obj = structuredClone(input);
    delete obj.kind;
    delete obj.apiVersion;
    obj.metadata ??= {};
    const meta = obj.metadata;
    if (!meta.name && meta.generateName) {
      let suffix = "";
      for (let i = 0; i < 5; i++) suffix += GENERATE_SUFFIX[Math.floor(Math.random() * GENERATE_SUFFIX.length)];
      meta.name = `${meta.generateName}${suffix}`;
    }
    if (!meta.name)
      throw statusErrors.invalid(def.kind, def.group, "", [
        { field: "metadata.name", message: "Required value: name or generateName is required" },
      ]);
    if (meta.resourceVersion) {
      throw statusErrors.badRequest("resourceVersion should not be set on objects to be created");
    }
    meta.namespace = ns;
    meta.uid = randomUUID();
    meta.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    delete meta.deletionTimestamp;
    if (def.tracksGeneration) meta.generation = 1;
    def.defaults?.(obj, this.ctx);
    this.validateMeta(def, obj);
    if (this.table(def).has(key(ns, meta.name))) throw statusErrors.alreadyExists(def.plural, def.group, meta.name);
    if (dryRun) return obj;
    meta.resourceVersion = this.nextRv();
    this.table(def).set(key(ns, meta.name), obj);
    this.onChange(def, ns, meta.name, obj, undefined);
    return structuredClone(obj);
  }

  /**
   * Replaces the object (PUT, and PATCH after applying the patch). A
   * resourceVersion in the input must equal the stored one (409 Conflict).
   * `part` "status" writes only .status; "main" keeps the stored .status.
   */
  update(def: ResourceDef, ns: string, name: string, input: KubeObject, part: "main" | "status" = "main"): KubeObject {
    const old = this.table(def).get(key(ns, name));
    if (!old) throw statusErrors.notFound(def.plural, def.group, name);
    const next = structuredClone(input);
    delete next.kind;
    delete next.apiVersion;
    next.metadata ??= {};
    if (next.metadata.name !== undefined && next.metadata.name !== name) {
      throw statusErrors.badRequest(
        `the name of the object (${next.metadata.name}) does not match the name on the URL (${name})`,
      );
    }
    const rv = next.metadata.resourceVersion;
    if (rv !== undefined && rv !== "" && rv !== old.metadata.resourceVersion)
      throw statusErrors.conflict(def.plural, def.group, name);
    if (next.metadata.uid !== undefined && next.metadata.uid !== old.metadata.uid) {
      throw statusErrors.conflict(def.plural, def.group, name);
    }
    let merged: KubeObject;
    if (part === "status") {
      merged = { ...structuredClone(old), status: next.status };
    } else {
      merged = next;
      merged.metadata = {
        ...next.metadata,
        name,
        namespace: ns,
        uid: old.metadata.uid,
        creationTimestamp: old.metadata.creationTimestamp,
      };
      if (old.metadata.deletionTimestamp) merged.metadata.deletionTimestamp = old.metadata.deletionTimestamp;
      if (def.hasStatus) merged.status = structuredClone(old.status);
      const causes = def.validateUpdate?.(merged, old) ?? [];
      if (causes.length) throw statusErrors.invalid(def.kind, def.group, name, causes);
      this.validateMeta(def, merged);
      if (def.tracksGeneration) {
        const specChanged = JSON.stringify(merged.spec) !== JSON.stringify(old.spec);
        merged.metadata.generation = (old.metadata.generation ?? 1) + (specChanged ? 1 : 0);
      }
    }
    if (
      JSON.stringify(merged) ===
      JSON.stringify({ ...old, metadata: { ...old.metadata, resourceVersion: merged.metadata.resourceVersion } })
    ) {
      // A no-op write does not bump resourceVersion (the server skips the storage write).
      return structuredClone(old);
    }
    merged.metadata.resourceVersion = this.nextRv();
    this.table(def).set(key(ns, name), merged);
    this.onChange(def, ns, name, merged, old);
    return structuredClone(merged);
  }

  /** Removes the object now, or marks it terminating while finalizers remain. */
  delete(
    def: ResourceDef,
    ns: string,
    name: string,
    preconditions?: { uid?: string; resourceVersion?: string },
  ): KubeObject {
    const old = this.table(def).get(key(ns, name));
    if (!old) throw statusErrors.notFound(def.plural, def.group, name);
    if (preconditions?.uid && preconditions.uid !== old.metadata.uid) {
      throw statusErrors.conflict(def.plural, def.group, name);
    }
    if (preconditions?.resourceVersion && preconditions.resourceVersion !== old.metadata.resourceVersion) {
      throw statusErrors.conflict(def.plural, def.group, name);
    }
    if ((old.metadata.finalizers ?? []).length > 0) {
      if (!old.metadata.deletionTimestamp) {
        const next = structuredClone(old);
        next.metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, "Z");
        next.metadata.deletionGracePeriodSeconds = 0;
        next.metadata.resourceVersion = this.nextRv();
        this.table(def).set(key(ns, name), next);
        this.onChange(def, ns, name, next, old);
        return structuredClone(next);
      }
      return structuredClone(old);
    }
    this.table(def).delete(key(ns, name));
    this.onChange(def, ns, name, undefined, old);
    return structuredClone(old);
  }

  /** Drops finalizers the double's controllers own and completes a pending deletion. */
  removeFinalizer(def: ResourceDef, ns: string, name: string, finalizer: string): void {
    const old = this.table(def).get(key(ns, name));
    if (!old) return;
    const finalizers = (old.metadata.finalizers ?? []).filter((f: string) => f !== finalizer);
    if (old.metadata.deletionTimestamp && finalizers.length === 0) {
      this.table(def).delete(key(ns, name));
      this.onChange(def, ns, name, undefined, old);
      return;
    }
    const next = structuredClone(old);
    next.metadata.finalizers = finalizers;
    next.metadata.resourceVersion = this.nextRv();
    this.table(def).set(key(ns, name), next);
  }

  /** Writes status (used by the double's simulated controllers); bumps resourceVersion. */
  writeStatus(def: ResourceDef, ns: string, name: string, mutate: (obj: KubeObject) => void): KubeObject | undefined {
    const old = this.table(def).get(key(ns, name));
    if (!old) return undefined;
    const next = structuredClone(old);
    mutate(next);
    next.metadata.resourceVersion = this.nextRv();
    this.table(def).set(key(ns, name), next);
    this.onChange(def, ns, name, next, old);
    return structuredClone(next);
  }
}
