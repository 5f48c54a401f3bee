// The three patch formats the API server accepts on PATCH. Strategic merge
// differs from JSON merge only for lists that have a patch merge key in the
// Kubernetes types; the keys for the fields these adapters touch are listed
// here (containers by name, env by name, ports by containerPort, ...). Other
// lists are replaced, as the server does for lists without a merge key.
import { statusErrors } from "./status.ts";

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k] ?? null, v);
  }
  return out;
}

const MERGE_KEYS: Record<string, string> = {
  containers: "name",
  initContainers: "name",
  ephemeralContainers: "name",
  volumes: "name",
  env: "name",
  volumeMounts: "mountPath",
  volumeDevices: "devicePath",
  imagePullSecrets: "name",
  ports: "containerPort",
  conditions: "type",
  hostAliases: "ip",
  topologySpreadConstraints: "topologyKey",
};
// Service ports merge by "port", container ports by "containerPort".
const SERVICE_PORTS_KEY = "port";

/** Strategic merge patch for the fields listed in MERGE_KEYS, with `$patch: replace|delete` directives. */
export function strategicMergePatch(target: Json, patch: Json, path: string[] = []): Json {
  if (!isObject(patch)) return structuredClone(patch);
  if (patch.$patch === "replace") {
    const { $patch: _, ...rest } = patch;
    return structuredClone(rest);
  }
  if (patch.$patch === "delete") return null;
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (k.startsWith("$")) continue; // $retainKeys, $setElementOrder: ordering hints only
    if (v === null) {
      delete out[k];
      continue;
    }
    const mergeKey = k === "ports" && isServicePorts(out, v) ? SERVICE_PORTS_KEY : MERGE_KEYS[k];
    if (Array.isArray(v) && mergeKey && (Array.isArray(out[k]) || out[k] === undefined)) {
      out[k] = mergeList((out[k] as Json[] | undefined) ?? [], v, mergeKey, [...path, k]);
    } else {
      out[k] = strategicMergePatch(out[k] ?? null, v, [...path, k]);
    }
  }
  return out;
}

function isServicePorts(parent: JsonObject, patchList: Json): boolean {
  const items = [...(Array.isArray(parent.ports) ? parent.ports : []), ...(Array.isArray(patchList) ? patchList : [])];
  return items.some((p) => isObject(p) && "port" in p && !("containerPort" in p));
}

function mergeList(current: Json[], patch: Json[], key: string, path: string[]): Json[] {
  const out = current.map((x) => structuredClone(x));
  for (const item of patch) {
    if (!isObject(item) || !(key in item)) {
      throw statusErrors.badRequest(`map: ${JSON.stringify(item)} does not contain declared merge key: ${key}`);
    }
    const idx = out.findIndex((x) => isObject(x) && x[key] === item[key]);
    if (item.$patch === "delete") {
      if (idx >= 0) out.splice(idx, 1);
      continue;
    }
    if (idx >= 0) out[idx] = strategicMergePatch(out[idx], item, path);
    else out.push(strategicMergePatch(null, item, path));
  }
  return out;
}

type JsonPatchOp = { op: string; path: string; value?: Json; from?: string };

function pointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw statusErrors.badRequest(`invalid JSON pointer ${JSON.stringify(path)}`);
  return path
    .slice(1)
    .split("/")
    .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
}

/** RFC 6902 JSON patch (add, remove, replace, move, copy, test). */
export function jsonPatch(target: Json, ops: unknown): Json {
  if (!Array.isArray(ops)) throw statusErrors.badRequest("json patch must be an array of operations");
  let doc = structuredClone(target);
  const get = (parts: string[]): Json | undefined => {
    let cur: Json | undefined = doc;
    for (const p of parts) {
      if (Array.isArray(cur)) cur = cur[Number(p)];
      else if (isObject(cur)) cur = cur[p];
      else return undefined;
    }
    return cur;
  };
  const parentOf = (parts: string[]) => {
    const parent = get(parts.slice(0, -1));
    if (!Array.isArray(parent) && !isObject(parent)) {
      throw statusErrors.internal(`jsonpatch: doc is missing path: "/${parts.join("/")}"`);
    }
    return { parent, last: parts[parts.length - 1] };
  };
  const remove = (parts: string[]): Json => {
    const { parent, last } = parentOf(parts);
    if (Array.isArray(parent)) return parent.splice(Number(last), 1)[0];
    if (!(last in parent))
      throw statusErrors.internal(`jsonpatch remove operation does not apply: doc is missing key: /${parts.join("/")}`);
    const v = parent[last];
    delete parent[last];
    return v;
  };
  const add = (parts: string[], value: Json) => {
    if (parts.length === 0) {
      doc = value;
      return;
    }
    const { parent, last } = parentOf(parts);
    if (Array.isArray(parent)) parent.splice(last === "-" ? parent.length : Number(last), 0, value);
    else parent[last] = value;
  };
  for (const raw of ops as JsonPatchOp[]) {
    const parts = pointer(raw.path);
    switch (raw.op) {
      case "add":
        add(parts, structuredClone(raw.value ?? null));
        break;
      case "remove":
        remove(parts);
        break;
      case "replace":
        if (get(parts) === undefined)
          throw statusErrors.internal(`jsonpatch replace operation does not apply: doc is missing key: ${raw.path}`);
        remove(parts);
        add(parts, structuredClone(raw.value ?? null));
        break;
      case "move":
        add(parts, remove(pointer(raw.from ?? "")));
        break;
      case "copy":
        add(parts, structuredClone(get(pointer(raw.from ?? "")) ?? null));
        break;
      case "test":
        if (JSON.stringify(get(parts)) !== JSON.stringify(raw.value))
          throw statusErrors.internal(`testing value ${raw.path} failed`);
        break;
      default:
        throw statusErrors.badRequest(`Unexpected kind: ${raw.op}`);
    }
  }
  return doc;
}

export const PATCH_TYPES = {
  "application/merge-patch+json": mergePatch,
  "application/strategic-merge-patch+json": strategicMergePatch,
  "application/json-patch+json": jsonPatch,
} as const;
export type PatchType = keyof typeof PATCH_TYPES;
