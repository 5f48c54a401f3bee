import { type Usage, zeroUsage } from "../../driver.ts";
import type { Cgroup, CgroupStats } from "./cgroups.ts";
import { addStats } from "./spare-cgroup.ts";
import { type IoBytes, ioSince, type WorkspaceIo } from "./workspace-io.ts";

/** Memory samples of a cgroup taken by the driver's sampler, for the average RSS. */
export interface MemorySamples {
  memSampleSum: number;
  memSamples: number;
}

/** Where a sandbox's usage comes from while it runs. */
export interface UsageSources extends MemorySamples {
  cgroup: Cgroup;
  /**
   * The counters of its cgroups before this one (a released sandbox resumed
   * in the spare launcher's cgroup, spare-cgroup.ts): added to this one's.
   */
  cgroupBase?: CgroupStats;
  /** Its workspace's disk counters, and their values when the sandbox started. */
  io?: WorkspaceIo;
  ioBase?: IoBytes;
  /** Bytes the file calls moved (counted only without the workspace's own counters). */
  fileReadBytes: number;
  fileWriteBytes: number;
  /** Lifetime usage once the sandbox stopped (its cgroup may be gone). */
  finalUsage?: Usage;
}

/** A cgroup's counters as usage; the average memory from the samples, the peak without any. */
export function usageOf(
  stats: Pick<CgroupStats, "cpuNs" | "memoryPeakBytes" | "ioReadBytes" | "ioWriteBytes">,
  samples: MemorySamples,
): Usage {
  const peak = stats.memoryPeakBytes;
  const { memSampleSum, memSamples } = samples;
  return {
    cpuMs: Math.round(stats.cpuNs / 1e6),
    memoryPeakBytes: peak,
    // With no sample taken (a very short exec) the only honest figure we have is the peak.
    memoryAvgBytes:
      memSamples > 0 ? Math.min(peak || Number.POSITIVE_INFINITY, Math.round(memSampleSum / memSamples)) : peak,
    diskReadBytes: stats.ioReadBytes,
    diskWriteBytes: stats.ioWriteBytes,
    // The cgroup knows nothing of the network: the driver sets these from the egress proxy (0 without a policy).
    networkEgressBytes: 0,
    networkIngressBytes: 0,
  };
}

/** Bytes the workspace read and wrote since the sandbox started; undefined without counters. */
export function workspaceIo(src: Pick<UsageSources, "io" | "ioBase">): IoBytes | undefined {
  const now = src.io?.read();
  return now && src.ioBase ? ioSince(now, src.ioBase) : undefined;
}

/** The sandbox's usage so far (its lifetime usage once its cgroup is gone). */
export function currentUsage(src: UsageSources): Usage {
  if (!src.cgroup.exists()) return src.finalUsage ?? zeroUsage();
  const stats = src.cgroup.stats();
  const usage = usageOf(src.cgroupBase ? addStats(src.cgroupBase, stats) : stats, src);
  const disk = workspaceIo(src);
  if (disk) {
    usage.diskReadBytes = disk.read;
    usage.diskWriteBytes = disk.write;
  } else {
    // No workspace image (made before sizes were enforced): the cgroup's counters and the file calls.
    usage.diskReadBytes += src.fileReadBytes;
    usage.diskWriteBytes += src.fileWriteBytes;
  }
  return usage;
}

/** usage with a sandbox's egress proxy totals (none without a proxy: usage as it is; 0 for a sandbox without a policy). */
export function withNetwork(usage: Usage, network: { egressBytes: number; ingressBytes: number } | undefined): Usage {
  if (!network) return usage;
  return { ...usage, networkEgressBytes: network.egressBytes, networkIngressBytes: network.ingressBytes };
}
