export { KubeDouble, type KubeDoubleOptions, type RecordedRequest } from "./double.ts";
export type { KubeObject } from "./resources.ts";
export { parseLabelSelector } from "./selectors.ts";
export { jsonPatch, mergePatch, strategicMergePatch } from "./patch.ts";
export { type KubeStatus, StatusError } from "./status.ts";
export { restrictedViolations } from "./pod-security.ts";
