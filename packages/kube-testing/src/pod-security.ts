// The "restricted" Pod Security Standard's checks (as the PodSecurity
// admission plugin applies them at level restricted, version latest), for a
// pod spec. Returns the violations; [] means the pod is admitted.
import type { KubeObject } from "./resources.ts";

const ALLOWED_VOLUME_TYPES = new Set([
  "configMap",
  "csi",
  "downwardAPI",
  "emptyDir",
  "ephemeral",
  "persistentVolumeClaim",
  "projected",
  "secret",
  "image",
]);

/** What in a pod spec breaks the `restricted` Pod Security Standard (as admission would report it). */
export function restrictedViolations(spec: KubeObject | undefined): string[] {
  if (!spec) return ["no pod spec"];
  const out: string[] = [];
  const podSc = spec.securityContext ?? {};
  const containers: KubeObject[] = [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) out.push("host namespaces (hostNetwork/hostPID/hostIPC=true)");
  for (const v of spec.volumes ?? []) {
    const type = Object.keys(v).find((k) => k !== "name");
    if (type && !ALLOWED_VOLUME_TYPES.has(type)) out.push(`restricted volume types (volume "${v.name}" uses ${type})`);
  }
  const podSeccomp = podSc.seccompProfile?.type;
  if (podSc.runAsUser === 0) out.push("runAsUser=0 (pod must not set runAsUser=0)");
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    if (sc.privileged) out.push(`privileged (container "${c.name}" must not set securityContext.privileged=true)`);
    if (sc.allowPrivilegeEscalation !== false)
      out.push(
        `allowPrivilegeEscalation != false (container "${c.name}" must set securityContext.allowPrivilegeEscalation=false)`,
      );
    const drop: string[] = sc.capabilities?.drop ?? [];
    if (!drop.includes("ALL"))
      out.push(`unrestricted capabilities (container "${c.name}" must set securityContext.capabilities.drop=["ALL"])`);
    const add: string[] = sc.capabilities?.add ?? [];
    if (add.some((a) => a !== "NET_BIND_SERVICE"))
      out.push(
        `unrestricted capabilities (container "${c.name}" must not include ${add.join(",")} in securityContext.capabilities.add)`,
      );
    if (sc.runAsNonRoot !== true && podSc.runAsNonRoot !== true)
      out.push(`runAsNonRoot != true (container "${c.name}" or pod must set runAsNonRoot=true)`);
    if (sc.runAsNonRoot === false)
      out.push(`runAsNonRoot != true (container "${c.name}" must not set runAsNonRoot=false)`);
    if (sc.runAsUser === 0) out.push(`runAsUser=0 (container "${c.name}" must not set runAsUser=0)`);
    const seccomp = sc.seccompProfile?.type ?? podSeccomp;
    if (seccomp !== "RuntimeDefault" && seccomp !== "Localhost")
      out.push(
        `seccompProfile (container "${c.name}" or pod must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
      );
    if ((c.ports ?? []).some((p: KubeObject) => p.hostPort)) out.push(`hostPort (container "${c.name}" uses hostPort)`);
  }
  return out;
}
