import { resolve } from "node:path";
import {
  bool,
  ConfigError,
  custom,
  host,
  int,
  internalTlsRows,
  list,
  logLevel,
  oneOf,
  port,
  raw,
  readSettings,
  replaced,
  text,
  url,
} from "@platform/config";
import { metricsTokenSetting, otelEndpointSetting } from "@platform/rpc/settings";
import { proxyKeyFile } from "./egress/key-setting.ts";
import { parseHostsSetting } from "./egress/resolver.ts";
import { LIMITS } from "./service/limits.ts";
import { workspaceSizeBytes } from "./service/workspace-size.ts";

export { ConfigError };

export interface ComputeConfig {
  port: number;
  host: string;
  databaseUrl?: string;
  dataDir: string;
  driver: "local" | "kubernetes";
  sandboxImage: string;
  /** COMPUTE_UNKNOWN_IMAGE */
  unknownImage: "refuse" | "host";
  /** COMPUTE_DEFAULT_IMAGE_PACKAGES */
  defaultImagePackages: string[];
  pvcStorageClass: string;
  pvcWorkspaceSize: string;
  pidsMax: number;
  gcIntervalMs: number;
  /**
   * Local driver: sandboxes keep running when the service stops and are
   * re-attached on the next start (the default), or end with it (the
   * one-command launcher, whose Ctrl-C must leave no process behind).
   */
  keepSandboxesOnExit: boolean;
  /**
   * COMPUTE_IDLE_PAUSE_SECONDS: a sandbox with no running exec for this long
   * is paused (CreateSandbox's idle_timeout overrides it per sandbox); 0 =
   * never (`off` or 0).
   */
  idlePauseMs: number;
  /** Local driver: COMPUTE_PAUSE_RELEASE_SECONDS, how long a paused sandbox keeps its processes (frozen). */
  pauseReleaseMs: number;
  /** Local driver: COMPUTE_CGROUP_FAVOR_DYNMODS, cheap cgroup migrations for starts and resumes (dynmods.ts). */
  favorDynamicCgroupMods: boolean;
  /** Kubernetes driver: COMPUTE_NAMESPACE; absent: the service account's namespace. */
  kubernetesNamespace?: string;
  /** Kubernetes driver: SANDBOX_RUN_AS_USER, the sandboxes' uid; absent: the driver's 1000 (never root). */
  sandboxRunAsUser?: number;
  /** COMPUTE_EGRESS_HOSTS: fixed answers of the proxy's resolver (name → addresses). */
  egressHosts: Map<string, string[]>;
  /** COMPUTE_EGRESS_DNS_SERVERS: the servers the proxy asks; empty: the host's resolver. */
  egressDnsServers: string[];
  /** COMPUTE_EGRESS_PROTECTED_PORTS: never reachable on the host's own addresses. */
  egressProtectedPorts: number[];
  /** COMPUTE_EGRESS_SPLICE_RELAY: tunnels' bytes moved by splice-relay.c where it can run. */
  egressSpliceRelay: boolean;
  /** Kubernetes driver: COMPUTE_EGRESS_PROXY_ADDRESS, `host:port` of the egress proxy's Service. */
  egressProxyAddress?: string;
  /** Kubernetes driver: COMPUTE_EGRESS_PROXY_KEY_FILE's key (sandboxes' proxy credentials). */
  egressProxyKey?: Buffer;
  /** METRICS_TOKEN: the bearer token of GET /metrics; unset: not served. */
  metricsToken?: string;
  logLevel: string;
  /** OTEL_EXPORTER_OTLP_ENDPOINT: where spans are exported (OTLP/HTTP); unset: none. */
  otelEndpoint?: string;
}

/** Every setting of the compute service, in the order `--settings` and the README list them. */
export const COMPUTE_SETTINGS = {
  port: port("COMPUTE_PORT", {
    default: 50051,
    doc: "gRPC/Connect port, mutual TLS only (HTTP/2 by ALPN, HTTP/1.1 for gRPC-Web/Connect)",
  }),
  ...internalTlsRows({
    files:
      "PEM paths: the platform CA and compute's certificate (CN `compute`). `ComputeService` answers only the `agents` and `e2b` certificates (PERMISSION_DENIED `caller_not_allowed` otherwise); health and reflection any certificate of the CA, so `buf curl --list-methods` works with the `operator` certificate, which cannot exec in a sandbox",
    off: "`off`: plaintext without caller checks, development and tests only (logged as a warning)",
  }),
  computeHost: replaced("COMPUTE_HOST", "HOST", "every service reads HOST"),
  host: host(),
  databaseUrl: url("DATABASE_URL", {
    protocols: ["postgres:", "postgresql:"],
    secret: true,
    shown: "unset → PGlite in `$COMPUTE_DATA_DIR/pglite`",
    doc: "sandbox records",
  }),
  dataDir: text("COMPUTE_DATA_DIR", {
    default: ".data/compute",
    doc: "sandboxes (`sandboxes/<id>/`) and the sessions' workspaces (`workspaces/<tenant>_<session>/workspace.img`)",
  }),
  driver: oneOf("COMPUTE_DRIVER", ["local", "kubernetes"], { default: "local", doc: "or `kubernetes`" }),
  sandboxImage: text("SANDBOX_IMAGE", {
    default: "debian:bookworm-slim",
    doc: "default image. Local driver: a stored image's tree is the sandboxes' root (`platform images`; `$COMPUTE_DATA_DIR/images`); while this image is not stored, and with `host`, sandboxes see the host's read-only `/usr` (as before images)",
  }),
  unknownImage: oneOf("COMPUTE_UNKNOWN_IMAGE", ["refuse", "host"], {
    default: "refuse",
    doc: "local driver: a CreateSandbox `image` neither stored nor SANDBOX_IMAGE is INVALID_ARGUMENT listing the stored images (`refuse`), or runs on the host's `/usr`, logged (`host`, as before images)",
  }),
  defaultImagePackages: list("COMPUTE_DEFAULT_IMAGE_PACKAGES", {
    doc: "local driver: while `SANDBOX_IMAGE` is not stored, compute builds it at start from these Debian packages (comma-separated, e.g. `python3,nodejs,git`; mmdebstrap from Debian's mirror, at nice 10) in the background, logging its steps; sandboxes run on the host's `/usr` until it is stored, then on it. Empty: no build (`scripts/run.sh` sets `python3,nodejs,git` unless set)",
  }),
  pvcStorageClass: text("PVC_STORAGE_CLASS", { default: "", shown: '""', doc: "WorkspaceSpec default storage class" }),
  pvcWorkspaceSize: custom("PVC_WORKSPACE_SIZE", {
    shown: `\`${LIMITS.defaultWorkspaceSize}\``,
    doc: "WorkspaceSpec default size, as `workspace.size` (below)",
    read: (env) => {
      const size = raw(env, "PVC_WORKSPACE_SIZE") ?? LIMITS.defaultWorkspaceSize;
      try {
        workspaceSizeBytes(size, "PVC_WORKSPACE_SIZE");
      } catch (err) {
        throw new ConfigError("PVC_WORKSPACE_SIZE", (err as Error).message);
      }
      return size;
    },
  }),
  pidsMax: int("COMPUTE_PIDS_MAX", { default: 512, min: 16, max: 1_000_000, doc: "process cap per sandbox" }),
  gcIntervalSeconds: int("COMPUTE_GC_INTERVAL_SECONDS", {
    default: 3600,
    min: 1,
    max: 7 * 86400,
    doc: "in-process GC of expired workspaces",
  }),
  keepSandboxesOnExit: bool("COMPUTE_KEEP_SANDBOXES_ON_EXIT", {
    default: true,
    doc: "local driver: sandboxes keep running when the service stops and are re-attached on the next start; `0`: they end with it (the one-command launcher sets this)",
  }),
  idlePauseSeconds: int("COMPUTE_IDLE_PAUSE_SECONDS", {
    default: LIMITS.defaultIdlePauseMs / 1000,
    min: 0,
    max: LIMITS.maxIdleTimeoutMs / 1000,
    words: { off: 0 },
    doc: "a sandbox with no exec or file call for this long is paused; `off` or `0` never pauses for idleness (PauseSandbox still works). CreateSandbox's `idle_timeout` overrides it per sandbox (at most 7 days)",
  }),
  pauseReleaseSeconds: int("COMPUTE_PAUSE_RELEASE_SECONDS", {
    default: 60,
    min: 0,
    max: LIMITS.maxIdleTimeoutMs / 1000,
    doc: "local driver: a paused sandbox stays frozen this long, its processes kept (a resume is a thaw); then they are ended and its memory given back, the workspace kept (a resume starts it again; nothing else is lost: a command's background processes end with it). `0`: at once",
  }),
  egressSpliceRelay: bool("COMPUTE_EGRESS_SPLICE_RELAY", {
    default: true,
    doc: "the egress proxy hands each open tunnel to a small relay process (built with cc at first use) that moves its bytes with splice(2), off the service's event loop; needs pidfd_getfd (Linux 5.6+) and the right to use it on the service (root, or CAP_SYS_PTRACE). Where it cannot run, or `0`, the service relays the bytes itself (the same, about half the speed)",
  }),
  favorDynamicCgroupMods: bool("COMPUTE_CGROUP_FAVOR_DYNMODS", {
    default: false,
    doc: "local driver: mounts an empty cgroup hierarchy with `favordynmods` at /run/platform-compute-dynmods (kept after exit; `umount` removes it, but on Linux ≥ 6.18 the kernel keeps cheap migrations until a reboot: a one-way switch), so moving a sandbox's first process into its cgroups skips an RCU grace period (12-20 ms → 0.4 ms; a released sandbox's resume 99.9 → 38 ms). Machine-wide: forks and exits take a slightly slower path (fork + exit 234 → 246 µs, within this machine's noise). Measured on a fresh boot, 2026-11-27: it moves the released resume (59.2 → 51.6 ms p50) and nothing else the bench measures (exec round trip and create → first byte place their processes ahead of time). Off by default because it changes the whole machine until a reboot, which an operator must choose",
  }),
  kubernetesNamespace: text("COMPUTE_NAMESPACE", {
    shown: "the service account's",
    doc: "kubernetes driver: where sandbox pods and claims live",
  }),
  sandboxRunAsUser: int("SANDBOX_RUN_AS_USER", {
    min: 1,
    shown: "1000",
    doc: "kubernetes driver: the sandboxes' uid and gid (restricted Pod Security forbids root)",
  }),
  egressHosts: custom("COMPUTE_EGRESS_HOSTS", {
    shown: "unset",
    doc: "fixed answers of the egress proxy's resolver, `name=address,...` (a name may repeat), asked before DNS: tests and air-gapped sites. The policy still applies to the name and to the address",
    read: (env) => {
      try {
        return parseHostsSetting(raw(env, "COMPUTE_EGRESS_HOSTS") ?? "");
      } catch (err) {
        throw new ConfigError("COMPUTE_EGRESS_HOSTS", `COMPUTE_EGRESS_HOSTS: ${(err as Error).message}`);
      }
    },
  }),
  egressDnsServers: custom("COMPUTE_EGRESS_DNS_SERVERS", {
    shown: "unset",
    doc: "DNS servers the egress proxy asks, `address[:port],...`; unset: the host's resolver (getaddrinfo)",
    read: (env) => {
      const list = (raw(env, "COMPUTE_EGRESS_DNS_SERVERS") ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      for (const s of list)
        if (!/^[0-9a-fA-F.:[\]]+$/.test(s))
          throw new ConfigError("COMPUTE_EGRESS_DNS_SERVERS", `COMPUTE_EGRESS_DNS_SERVERS: "${s}" is not an address`);
      return list;
    },
  }),
  egressProtectedPorts: custom("COMPUTE_EGRESS_PROTECTED_PORTS", {
    shown: "`5432,8080,8081,8082,50051,50052,50053` and `COMPUTE_PORT`",
    doc: "ports no sandbox reaches on any address of the host (loopback included), whatever its policy: PostgreSQL and the platform's services. Loopback, private and link-local addresses are refused anyway unless a policy lists a CIDR inside them",
    read: (env) => {
      const v = raw(env, "COMPUTE_EGRESS_PROTECTED_PORTS") ?? "5432,8080,8081,8082,50051,50052,50053";
      const ports = v
        .split(",")
        .map((p) => p.trim())
        .filter(Boolean)
        .map(Number);
      if (ports.some((p) => !Number.isInteger(p) || p < 1 || p > 65535))
        throw new ConfigError(
          "COMPUTE_EGRESS_PROTECTED_PORTS",
          `COMPUTE_EGRESS_PROTECTED_PORTS: "${v}" is not a list of ports`,
        );
      return ports;
    },
  }),
  egressProxyAddress: custom("COMPUTE_EGRESS_PROXY_ADDRESS", {
    shown: "unset",
    doc: "kubernetes driver: `host:port` of the egress proxy's Service as sandbox pods reach it (the manifests: `egress-proxy:3128`); with `COMPUTE_EGRESS_PROXY_KEY_FILE`, sandboxes may have a network policy; unset: a policy is FAILED_PRECONDITION",
    read: (env) => {
      const v = raw(env, "COMPUTE_EGRESS_PROXY_ADDRESS");
      if (v === undefined) return undefined;
      if (!/^[A-Za-z0-9.-]{1,253}:\d{1,5}$/.test(v) || Number(v.split(":")[1]) > 65535)
        throw new ConfigError("COMPUTE_EGRESS_PROXY_ADDRESS", `COMPUTE_EGRESS_PROXY_ADDRESS: "${v}" is not host:port`);
      return v;
    },
  }),
  egressProxyKey: proxyKeyFile("COMPUTE_EGRESS_PROXY_KEY_FILE", false),
  metricsToken: metricsTokenSetting(
    "bearer token a scraper must present for `GET /metrics` (Prometheus text format) on `COMPUTE_PORT`, which also asks for a client certificate of the platform CA (any service's, e.g. `operator`); at least 32 characters; unset: `/metrics` is not served (404)",
  ),
  logLevel: logLevel(),
  otelEndpoint: otelEndpointSetting(),
};

/** Reads and validates the compute service's environment once, at start-up. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): ComputeConfig {
  const s = readSettings(COMPUTE_SETTINGS, env);
  if ((s.egressProxyAddress === undefined) !== (s.egressProxyKey === undefined))
    throw new ConfigError(
      "COMPUTE_EGRESS_PROXY_ADDRESS",
      "COMPUTE_EGRESS_PROXY_ADDRESS and COMPUTE_EGRESS_PROXY_KEY_FILE go together (one is set without the other)",
    );
  return {
    port: s.port,
    host: s.host,
    databaseUrl: s.databaseUrl,
    dataDir: resolve(s.dataDir),
    driver: s.driver,
    sandboxImage: s.sandboxImage,
    unknownImage: s.unknownImage,
    defaultImagePackages: s.defaultImagePackages,
    pvcStorageClass: s.pvcStorageClass,
    pvcWorkspaceSize: s.pvcWorkspaceSize,
    pidsMax: s.pidsMax,
    gcIntervalMs: s.gcIntervalSeconds * 1000,
    keepSandboxesOnExit: s.keepSandboxesOnExit,
    idlePauseMs: s.idlePauseSeconds * 1000,
    pauseReleaseMs: s.pauseReleaseSeconds * 1000,
    favorDynamicCgroupMods: s.favorDynamicCgroupMods,
    kubernetesNamespace: s.kubernetesNamespace,
    sandboxRunAsUser: s.sandboxRunAsUser,
    egressHosts: s.egressHosts,
    egressDnsServers: s.egressDnsServers,
    egressProtectedPorts: [...new Set([...s.egressProtectedPorts, s.port].filter((p) => p > 0))],
    egressSpliceRelay: s.egressSpliceRelay,
    egressProxyAddress: s.egressProxyAddress,
    egressProxyKey: s.egressProxyKey,
    metricsToken: s.metricsToken,
    logLevel: s.logLevel,
    otelEndpoint: s.otelEndpoint,
  };
}
