import type { ComputePort } from "./compute-port.ts";
import { randomBytes } from "node:crypto";
import { Code, PlatformError } from "@platform/errors";

const MARK_VAR = "PLATFORM_E2B_PROCESS";
/** Signals every process whose environment holds the mark ($1) with $2; never itself (its environment lacks it). */
const SIGNAL_SCRIPT =
  'for d in /proc/[0-9]*; do if tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qxF "$1"; then kill -s "$2" "$(basename "$d")" 2>/dev/null; fi; done; exit 0';

/** One event of a running process, as envd streams it. */
export type ProcEvent =
  | { type: "stdout" | "stderr"; data: Uint8Array }
  | { type: "end"; exitCode: number; status: string; error?: string };

export interface ProcConfig {
  cmd: string;
  args: string[];
  envs: Record<string, string>;
  cwd?: string;
}

interface Proc {
  pid: number;
  tag?: string;
  config: ProcConfig;
  abort: AbortController;
  /** In the command's environment (inherited by its children), so a signal can find the whole tree. */
  mark: string;
  signalled: boolean;
  listeners: Set<(e: ProcEvent) => void>;
  ended: boolean;
}

/**
 * The processes of one E2B sandbox. Each is one compute ExecCommand stream;
 * its pid is this table's number (compute does not expose the sandbox's
 * pids). Kill and the signals cancel the exec (compute stops the command).
 * Connect subscribes to the output from the moment it connects, as envd does.
 */
export class ProcessTable {
  readonly #procs = new Map<number, Proc>();
  #nextPid = 1000;

  constructor(
    private readonly compute: ComputePort,
    private readonly sandboxId: string,
    /** The sandbox's envVars, under each command's own. */
    private readonly baseEnvs: Record<string, string> = {},
  ) {}

  /** Starts the command; `listener` receives every event, the last one `end`. */
  start(config: ProcConfig, tag: string | undefined, listener: (e: ProcEvent) => void): number {
    const pid = this.#nextPid++;
    const proc: Proc = {
      pid,
      tag,
      config,
      abort: new AbortController(),
      mark: randomBytes(12).toString("hex"),
      signalled: false,
      listeners: new Set([listener]),
      ended: false,
    };
    this.#procs.set(pid, proc);
    void this.#run(proc);
    return pid;
  }

  async #run(proc: Proc): Promise<void> {
    const emit = (e: ProcEvent) => {
      for (const l of proc.listeners) l(e);
    };
    let end: ProcEvent = { type: "end", exitCode: -1, status: "error", error: "the command ended without a result" };
    try {
      for await (const ev of this.compute.exec({
        sandboxId: this.sandboxId,
        command: proc.config.cmd,
        args: proc.config.args,
        env: { ...this.baseEnvs, ...proc.config.envs, [MARK_VAR]: proc.mark },
        workingDir: proc.config.cwd,
        // E2B commands may run as long as their connection; compute caps an exec at 600 s.
        timeoutMs: 0,
        signal: proc.abort.signal,
      })) {
        if (ev.type === "completed") {
          end =
            ev.cancelled || (proc.signalled && ev.exitCode > 128)
              ? { type: "end", exitCode: -1, status: "signal: killed", error: "signal: killed" }
              : { type: "end", exitCode: ev.exitCode, status: `exit status ${ev.exitCode}` };
        } else emit(ev);
      }
    } catch (err) {
      end = { type: "end", exitCode: -1, status: "error", error: err instanceof Error ? err.message : String(err) };
    } finally {
      proc.ended = true;
      this.#procs.delete(proc.pid);
      emit(end);
      proc.listeners.clear();
    }
  }

  list(): { pid: number; tag?: string; config: ProcConfig }[] {
    return [...this.#procs.values()].map((p) => ({ pid: p.pid, tag: p.tag, config: p.config }));
  }

  /** Subscribes to a running process; undefined when there is none by that pid or tag. */
  connect(select: { pid?: number; tag?: string }, listener: (e: ProcEvent) => void): { pid: number; off: () => void } {
    const proc = this.#find(select);
    proc.listeners.add(listener);
    return { pid: proc.pid, off: () => proc.listeners.delete(listener) };
  }

  /**
   * Sends the signal to the command and every process it started (found by
   * its mark). Done inside the sandbox rather than by cancelling the exec
   * stream: compute does not see a cancel of an exec that has streamed
   * nothing yet (README, "Known limits"), and a cancel it missed kept the
   * sandbox busy even after the command died. The exec then ends by itself.
   */
  async signal(select: { pid?: number; tag?: string }, signal: "KILL" | "TERM"): Promise<void> {
    const proc = this.#find(select);
    proc.signalled = true;
    for await (const _ of this.compute.exec({
      sandboxId: this.sandboxId,
      command: "/bin/sh",
      args: ["-c", SIGNAL_SCRIPT, "signal", `${MARK_VAR}=${proc.mark}`, signal],
      env: {},
      timeoutMs: 30_000,
    })) {
      // The script's own output is of no interest.
    }
  }

  /** This service's shutdown: stops streaming (compute ends the commands with the sandboxes or their deadline). */
  killAll(): void {
    for (const p of this.#procs.values()) p.abort.abort(new Error("sandbox killed"));
  }

  #find(select: { pid?: number; tag?: string }): Proc {
    const proc =
      select.pid !== undefined
        ? this.#procs.get(select.pid)
        : [...this.#procs.values()].find((p) => select.tag !== undefined && p.tag === select.tag);
    if (!proc || proc.ended) {
      const what = select.pid !== undefined ? `pid ${select.pid}` : `tag ${JSON.stringify(select.tag ?? "")}`;
      throw new PlatformError(Code.NotFound, "not_found", `process with ${what} not found`);
    }
    return proc;
  }
}
