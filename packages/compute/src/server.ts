import { create } from "@bufbuild/protobuf";
import { type Duration, durationFromMs, type Timestamp, timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  type ComputeService,
  type ExecEvent as ExecEventMessage,
  ExecEventSchema,
  FileEntrySchema,
  NetworkEventSchema,
  type NetworkPolicy as NetworkPolicyMessage,
  NetworkPolicySchema,
  SandboxImageSchema,
  SandboxStatus,
  type UsageMetrics,
  UsageMetricsSchema,
} from "@platform/gen/compute/v1/compute_pb";
import type { NetworkPolicy } from "@platform/network-policy";
import type { ImageInfo, Usage } from "./driver.ts";
import type { ComputeDomain, NetworkPolicyInput } from "./service/compute-domain.ts";
import type { SandboxState } from "./store/sandbox-store.ts";

/**
 * The Connect implementation of compute.v1.ComputeService: message
 * conversion only; every rule lives in ComputeDomain. PlatformErrors thrown
 * by the domain become gRPC codes with ErrorInfo in @platform/rpc.
 */
export function computeServiceImpl(domain: ComputeDomain): ServiceImpl<typeof ComputeService> {
  return {
    async createSandbox(req) {
      const created = await domain.createSandbox({
        tenantId: req.tenantId,
        sessionId: req.sessionId,
        image: req.image,
        workspace: req.workspace
          ? { storageClass: req.workspace.storageClass, size: req.workspace.size, mountPath: req.workspace.mountPath }
          : undefined,
        limits: req.limits
          ? {
              cpuMillis: req.limits.cpuMillis,
              memoryBytes: Number(req.limits.memoryBytes),
              maxRuntimeMs: durationMs(req.limits.maxRuntime),
            }
          : undefined,
        idleTimeoutMs: durationMs(req.idleTimeout),
        networkPolicy: policyInput(req.networkPolicy),
      });
      return { sandboxId: created.sandboxId, status: statusOf(created.status), createdAt: ts(created.createdAt) };
    },

    async describeSandbox(req) {
      const view = await domain.describeSandbox(req.sandboxId);
      return {
        sandboxId: req.sandboxId,
        status: statusOf(view.status),
        createdAt: ts(view.createdAt),
        currentUptime: durationFromMs(view.uptimeMs),
        currentUsage: usageOf(view.usage),
        networkPolicy: policyMessage(view.networkPolicy),
      };
    },

    async importImage(req) {
      return { image: imageMessage(await domain.images.import(req.name, req.path)) };
    },

    async listImages() {
      const r = domain.images.list();
      return {
        images: r.images.map(imageMessage),
        defaultImage: r.defaultImage,
        defaultIsHost: r.defaultIsHost,
        anyImage: r.anyImage,
      };
    },

    async deleteImage(req) {
      return { image: imageMessage(await domain.images.remove(req.name)) };
    },

    async buildImage(req) {
      return { image: imageMessage(await domain.images.build(req.name, req.packages, req.suite)) };
    },

    async updateNetworkPolicy(req) {
      const r = await domain.updateNetworkPolicy(req.sandboxId, policyInput(req.networkPolicy));
      return { sandboxId: req.sandboxId, networkPolicy: policyMessage(r.networkPolicy) };
    },

    async listNetworkEvents(req) {
      const r = await domain.listNetworkEvents(req.sandboxId, req.pageSize, req.pageToken);
      return {
        nextPageToken: r.nextPageToken,
        events: r.events.map((e) =>
          create(NetworkEventSchema, {
            sequence: BigInt(e.seq),
            time: ts(e.at),
            host: e.host,
            port: e.port,
            address: e.address,
            allowed: e.allowed,
            reason: e.reason,
            protocol: e.protocol,
            egressBytes: BigInt(e.egressBytes),
            ingressBytes: BigInt(e.ingressBytes),
            duration: durationFromMs(Math.round(e.durationMs)),
          }),
        ),
      };
    },

    async destroySandbox(req) {
      const result = await domain.destroySandbox(req.sandboxId);
      return { sandboxId: req.sandboxId, totalUsage: usageOf(result.usage) };
    },

    async *execCommand(req, ctx: HandlerContext) {
      const events = domain.execCommand({
        sandboxId: req.sandboxId,
        command: req.command,
        args: req.args,
        env: req.env,
        workingDir: req.workingDir,
        timeoutMs: durationMs(req.timeout),
        signal: ctx.signal,
        execId: req.execId,
        stdin: req.stdin,
        terminal: req.terminal ? { rows: req.terminal.rows, cols: req.terminal.cols } : undefined,
      });
      for await (const e of events) {
        yield toMessage(e);
      }
    },

    async sendExecInput(req) {
      await domain.sendExecInput(req.sandboxId, req.execId, req.data, req.eof);
      return {};
    },

    async resizeExecTerminal(req) {
      await domain.resizeExecTerminal(req.sandboxId, req.execId, {
        rows: req.size?.rows ?? 0,
        cols: req.size?.cols ?? 0,
      });
      return {};
    },

    async readFile(req) {
      const r = await domain.readFile(req.sandboxId, req.path, Number(req.offset), Number(req.maxBytes));
      return { data: r.data, totalSize: BigInt(r.totalSize), eof: r.eof };
    },

    async writeFile(req) {
      const n = await domain.writeFile(req.sandboxId, req.path, req.data, req.append, req.mode);
      return { bytesWritten: BigInt(n) };
    },

    async pauseSandbox(req) {
      const status = await domain.pauseSandbox(req.sandboxId);
      return { sandboxId: req.sandboxId, status: statusOf(status) };
    },

    async resumeSandbox(req, ctx: HandlerContext) {
      const status = await domain.resumeSandbox(req.sandboxId, ctx.signal);
      return { sandboxId: req.sandboxId, status: statusOf(status) };
    },

    async listFiles(req) {
      const r = await domain.listFiles(req.sandboxId, req.path, req.recursive, req.maxEntries);
      return {
        entries: r.entries.map((e) =>
          create(FileEntrySchema, {
            path: e.path,
            size: BigInt(e.size),
            isDir: e.isDir,
            mode: e.mode,
            modifiedAt: ts(e.modifiedAt),
          }),
        ),
        truncated: r.truncated,
      };
    },
  };
}

function toMessage(e: import("./driver.ts").ExecEvent): ExecEventMessage {
  const emittedAt = ts(new Date());
  switch (e.type) {
    case "stdout":
      return create(ExecEventSchema, { emittedAt, event: { case: "stdout", value: { data: e.data } } });
    case "stderr":
      return create(ExecEventSchema, { emittedAt, event: { case: "stderr", value: { data: e.data } } });
    case "completed":
      return create(ExecEventSchema, {
        emittedAt,
        event: {
          case: "completed",
          value: {
            exitCode: e.exitCode,
            wallTime: durationFromMs(e.wallTimeMs),
            cancelled: e.cancelled,
            usage: usageOf(e.usage),
          },
        },
      });
  }
}

export function statusOf(state: SandboxState): SandboxStatus {
  switch (state) {
    case "STARTING":
      return SandboxStatus.STARTING;
    case "READY":
      return SandboxStatus.READY;
    case "PAUSED":
      return SandboxStatus.PAUSED;
    case "FAILED":
      return SandboxStatus.FAILED;
    case "DESTROYED":
      return SandboxStatus.DESTROYED;
  }
}

export function usageOf(u: Usage): UsageMetrics {
  const n = (v: number) => BigInt(Math.max(0, Math.round(v)));
  return create(UsageMetricsSchema, {
    cpuMs: n(u.cpuMs),
    memoryPeakBytes: n(u.memoryPeakBytes),
    memoryAvgBytes: n(u.memoryAvgBytes),
    diskReadBytes: n(u.diskReadBytes),
    diskWriteBytes: n(u.diskWriteBytes),
    networkEgressBytes: n(u.networkEgressBytes),
    networkIngressBytes: n(u.networkIngressBytes),
  });
}

function policyInput(p: NetworkPolicyMessage | undefined): NetworkPolicyInput | undefined {
  if (!p) return undefined;
  return {
    allowAll: p.allowAll,
    allowedDomains: p.allowedDomains,
    allowedCidrs: p.allowedCidrs.map((c) => ({ cidr: c.cidr, ports: c.ports })),
  };
}

function policyMessage(p: NetworkPolicy | undefined): NetworkPolicyMessage | undefined {
  return p ? create(NetworkPolicySchema, p) : undefined;
}

function ts(d: Date): Timestamp {
  return timestampFromDate(d);
}

function durationMs(d: Duration | undefined): number | undefined {
  if (!d) return undefined;
  return Number(d.seconds) * 1000 + Math.floor(d.nanos / 1e6);
}

/** A stored image as its message. */
function imageMessage(i: ImageInfo) {
  return create(SandboxImageSchema, {
    name: i.name,
    digest: i.digest,
    sizeBytes: BigInt(i.sizeBytes),
    createdAt: ts(new Date(i.createdAt)),
    source: i.source,
  });
}
