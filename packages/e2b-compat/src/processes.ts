import type { ComputeDomain } from "@platform/compute";
import { Code, PlatformError } from "@platform/errors";

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
    private readonly domain: ComputeDomain,
    private readonly sandboxId: string,
    /** The sandbox's envVars, under each command's own. */
    private readonly baseEnvs: Record<string, string> = {},
  ) {}

  /** Starts the command; `listener` receives every event, the last one `end`. */
  start(config: ProcConfig, tag: string | undefined, listener: (e: ProcEvent) => void): number {
    const pid = this.#nextPid++;
    const proc: Proc = { pid, tag, config, abort: new AbortController(), listeners: new Set([listener]), ended: false };
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
      for await (const ev of this.domain.execCommand({
        sandboxId: this.sandboxId,
        command: proc.config.cmd,
        args: proc.config.args,
        env: { ...this.baseEnvs, ...proc.config.envs },
        workingDir: proc.config.cwd,
        // E2B commands may run as long as their connection; compute caps an exec at 600 s.
        timeoutMs: 0,
        signal: proc.abort.signal,
      })) {
        if (ev.type === "completed") {
          end = ev.cancelled
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

  kill(select: { pid?: number; tag?: string }): void {
    this.#find(select).abort.abort(new Error("killed"));
  }

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
