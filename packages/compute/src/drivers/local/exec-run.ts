import { constants as osConstants } from "node:os";
import { PlatformError } from "@platform/errors";
import { type ExecEvent, type ExecRequest, type ExecStdin, type SandboxSpec, zeroUsage } from "../../driver.ts";
import { baseEnv } from "./bwrap.ts";
import type { Cgroup } from "./cgroups.ts";
import type { ExecHelper, ExitStatus, Launched } from "./exec-helper.ts";
import type { ExecAftermath } from "./exec-aftermath.ts";
import type { ExecSlots } from "./exec-slots.ts";
import { OutputQueue } from "./output-queue.ts";
import { processStartTime } from "./sandbox-layout.ts";
import { type MemorySamples, type UsageSources, usageOf, workspaceIo } from "./usage.ts";
import { ioSince } from "./workspace-io.ts";
import type { SandboxNetwork } from "./sandbox-network.ts";

/** One exec in flight: its cgroup, the helper child placed in it ahead (if any), its memory samples. */
export interface RunningExec extends MemorySamples {
  cgroup: Cgroup;
  placed?: number;
  /** The end of its tree's leftovers, begun when its command exited (not cancelled). */
  leftovers?: Promise<void>;
}

/** What an exec needs of its sandbox (ready, with an init to enter). */
export interface ExecTarget extends Pick<UsageSources, "io" | "ioBase"> {
  readonly spec: SandboxSpec;
  readonly initPid?: number;
  readonly initStartTime?: string;
  readonly uid: number;
  /** Execs in flight, for the memory sampler. */
  readonly execs: Set<RunningExec>;
  /** Run (once) after its next exec ended: an adopted warm sandbox's pool refills then (warm-sandboxes.ts). */
  afterExec?: () => void;
  readonly slots: ExecSlots;
}

/**
 * How long an exec's cleanup waits at most for its consumer to take the
 * event after its completed one (runExec), which rpc asks for once that
 * event and the status reached the socket.
 */
const COMPLETED_OUT_MS = 1000;

export interface ExecDeps {
  helper: ExecHelper;
  /** The sandboxes' way out through the egress proxy (absent: no sandbox has a network). */
  network?: SandboxNetwork;
  /** SIGTERM → SIGKILL grace on cancel. */
  killGraceMs: number;
  /** Where an ended exec's cleanup waits for the driver's other execs. */
  aftermath: ExecAftermath;
}

/**
 * Runs one command in target: in a cgroup of its own (from the spare slot
 * when one is ready), its output as events, then one `completed` with the
 * exec's own usage. A cancel signals the whole tree, then kills it after the
 * grace; a consumer that stops reading cancels it too.
 */
export async function* runExec(target: ExecTarget, request: ExecRequest, deps: ExecDeps): AsyncGenerator<ExecEvent> {
  const started = Date.now();
  if (request.signal?.aborted) {
    yield { type: "completed", exitCode: -1, wallTimeMs: 0, cancelled: true, usage: zeroUsage() };
    return;
  }
  const sandboxId = target.spec.sandboxId;
  // The egress listener of a sandbox with a policy is made before its command runs (here the first time).
  let networkEnv: Record<string, string>;
  try {
    networkEnv = (await deps.network?.prepare(sandboxId, target.initPid as number)) ?? {};
  } catch (err) {
    throw PlatformError.internal("exec transport failure", err);
  }
  const run: RunningExec = { ...(await target.slots.take()), memSampleSum: 0, memSamples: 0 };
  deps.aftermath.started();
  const ioStart = workspaceIo(target);
  const netStart = deps.network?.counters(sandboxId);
  target.execs.add(run);
  let proc: Launched;
  try {
    proc = await launch(target, run, request, deps.helper, networkEnv);
  } catch (err) {
    await endExec(target, run, deps);
    throw PlatformError.internal("exec transport failure", err);
  }
  const output = new OutputQueue(proc);
  if (request.input) feedInput(request.input, proc, request.terminal !== undefined);
  let status: ExitStatus | undefined;
  let exitedAt = 0;
  let cancelled = false;
  let spawnError: Error | undefined;
  const exit = proc.exit.then(
    (s) => {
      status = s;
      exitedAt = Date.now();
      // Background leftovers of a finished command are part of its tree: end them
      // so the output streams close and no orphan outlives the exec.
      if (!cancelled) {
        run.leftovers = run.cgroup.killAll();
        run.leftovers.catch(() => {}); // awaited (and its failure seen) by endExec
      }
    },
    (err: Error) => {
      spawnError = err;
      output.destroy();
    },
  );
  let graceTimer: NodeJS.Timeout | undefined;
  let finished = false;
  const onAbort = () => {
    if (cancelled || finished) return;
    cancelled = true;
    run.cgroup.signalAll("SIGTERM");
    graceTimer = setTimeout(() => void run.cgroup.killAll(), deps.killGraceMs);
    // Once every process of the tree has gone, stop waiting for the grace.
    const poll = setInterval(() => {
      if (finished) return clearInterval(poll);
      if (run.cgroup.isEmpty()) {
        clearInterval(poll);
        output.destroy();
      }
    }, 25);
  };
  request.signal?.addEventListener("abort", onAbort, { once: true });
  if (request.signal?.aborted) onAbort();

  try {
    yield* output.events();
    await exit;
    finished = true;
  } finally {
    request.signal?.removeEventListener("abort", onAbort);
    if (!finished) {
      // The consumer stopped reading: treat as cancel, but do not block on the grace.
      cancelled = true;
      finished = true;
      output.destroy();
      await endExec(target, run, deps);
    }
    clearTimeout(graceTimer);
  }
  if (spawnError) throw PlatformError.internal("exec transport failure", spawnError);
  const exitSignal = status?.signal;
  const exitCode = status?.code;
  const killed = exitSignal === "SIGKILL" || exitCode === 137;
  const ioEnd = ioStart ? workspaceIo(target) : undefined;
  // Only the counters the completed event reports are read before it is sent: the
  // cgroup's block I/O only without the workspace's disk counters, its OOM kills
  // only for a SIGKILLed exec (v1 counts an OOM kill in the victim's own cgroup,
  // this exec's, not in the limited parent).
  const counters = run.cgroup.execCounters({ io: !(ioStart && ioEnd), oomKills: killed });
  // The cleanup (rmdirs, the next slot's mkdirs and its helper child: several ms of kernel
  // time) starts once the consumer asks past the completed event (rpc: once that event and the
  // status reached the socket), not from the next turn, while node still sends them.
  let out!: () => void;
  const completedOut = new Promise<void>((resolve) => (out = resolve));
  let fallback: NodeJS.Timeout | undefined;
  try {
    await endExec(target, run, deps, completedOut);
    const oomKilled = killed && (counters.oomKills ?? 0) > 0;
    if (oomKilled) {
      const msg = `[compute] out of memory: the process was killed at the sandbox's memory limit of ${target.spec.limits.memoryBytes} bytes\n`;
      yield { type: "stderr", data: new TextEncoder().encode(msg) };
    }
    const usage = usageOf(
      {
        cpuNs: counters.cpuNs,
        memoryPeakBytes: counters.memoryPeakBytes,
        ioReadBytes: counters.io?.read ?? 0,
        ioWriteBytes: counters.io?.write ?? 0,
      },
      run,
    );
    if (ioStart && ioEnd) {
      // What reached the workspace's disk while it ran (writes still cached at its end count in the sandbox's totals once flushed).
      const done = ioSince(ioEnd, ioStart);
      usage.diskReadBytes = done.read;
      usage.diskWriteBytes = done.write;
    }
    if (deps.network && netStart && Object.keys(networkEnv).length > 0) {
      // Its connections end with its processes; their last bytes are counted once the proxy sees them end (bounded).
      await deps.network.settled(sandboxId, 500);
      const netEnd = deps.network.counters(sandboxId);
      usage.networkEgressBytes = netEnd.egressBytes - netStart.egressBytes;
      usage.networkIngressBytes = netEnd.ingressBytes - netStart.ingressBytes;
    }
    const code = cancelled ? -1 : exitSignal ? 128 + signalNumber(exitSignal) : (exitCode ?? -1);
    // A consumer that never asks again (nor returns) holds it at most this long.
    fallback = setTimeout(out, COMPLETED_OUT_MS).unref();
    yield {
      type: "completed",
      exitCode: code,
      wallTimeMs: (exitedAt || Date.now()) - started,
      cancelled,
      usage,
      ...(oomKilled ? { oomKilled } : {}),
    };
  } finally {
    clearTimeout(fallback);
    out();
  }
}

/**
 * The one cleanup of an exec, however it ended (launch failed, consumer
 * stopped, completed): nothing of its tree survives, its cgroup goes, and
 * the next exec's slot is made.
 */
async function endExec(
  target: ExecTarget,
  run: RunningExec,
  deps: ExecDeps,
  completedOut: Promise<void> = Promise.resolve(),
): Promise<void> {
  target.execs.delete(run);
  // Once the kill begun at the command's exit is done the cgroup is empty for good (nothing is
  // left in it to fork): awaited, not begun again (it would read the cgroup once more on the way).
  await (run.leftovers ?? run.cgroup.killAll());
  void completedOut.then(() => {
    deps.aftermath.ended(
      () => void run.cgroup.remove(),
      () => target.slots.replenish(),
    );
    const after = target.afterExec;
    target.afterExec = undefined;
    // After the completed event is written, not before it.
    if (after) setImmediate(after);
  });
}

/** Starts the command in the sandbox's namespaces, as its uid, inside the exec's cgroup. */
function launch(
  target: ExecTarget,
  run: RunningExec,
  request: ExecRequest,
  helper: ExecHelper,
  networkEnv: Record<string, string>,
): Promise<Launched> {
  const initPid = target.initPid as number;
  return helper.launch(
    {
      initPid,
      initStartTime: target.initStartTime ?? processStartTime(initPid),
      uid: target.uid,
      workingDir: request.workingDir,
      cgroupProcs: run.cgroup.procsFiles(),
      command: request.command,
      args: request.args,
      env: { ...baseEnv(target.spec.workspace.mountPath), ...networkEnv, ...request.env },
      ...(request.terminal ? { input: request.terminal } : request.input ? { input: "stdin" as const } : {}),
    },
    run.placed,
  );
}

/**
 * Copies an exec's input (issue 27) to the command as fast as it takes it:
 * the next chunk only once the socket took the last, so what the command has
 * not read stays queued in the domain, which bounds it. A terminal's input
 * goes on its stdout connection (the relay types it) and its resizes to the
 * helper. Once the command can take no more (the connection closed: it
 * exited, with everything holding its stdin), the input is ended.
 */
function feedInput(input: ExecStdin, proc: Launched, terminal: boolean): void {
  const sink = terminal ? proc.stdout : proc.stdin;
  if (!sink) {
    input.end();
    return;
  }
  const offResize = terminal && proc.resize ? input.onResize((s) => proc.resize?.(s.rows, s.cols)) : () => {};
  let done = false;
  sink.once("close", () => {
    done = true;
    offResize();
    input.end();
  });
  if (!terminal) {
    // What a command writes on its stdin is not output.
    sink.on("error", () => {});
    sink.on("data", () => {});
    sink.resume();
  }
  void (async () => {
    while (!done) {
      const chunk = await input.read();
      if (done) return;
      if (chunk === null) {
        sink.end();
        return;
      }
      if (!sink.write(chunk)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            sink.off("drain", go);
            sink.off("close", go);
            resolve();
          };
          sink.on("drain", go);
          sink.on("close", go);
        });
      }
    }
  })().catch(() => input.end());
}

export function signalNumber(signal: NodeJS.Signals): number {
  return osConstants.signals[signal] ?? 0;
}
