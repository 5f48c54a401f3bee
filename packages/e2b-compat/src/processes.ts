import { randomBytes, randomUUID } from "node:crypto";
import { Code, ComputeReason, PlatformError } from "@platform/errors";
import { type ComputePort, MAX_INPUT_CHUNK_BYTES } from "./compute-port.ts";

const MARK_VAR = "PLATFORM_E2B_PROCESS";
/**
 * Signals every process whose environment holds the mark ($1) with $2; never itself (its environment lacks it).
 * Exits 1 when it found none to signal.
 */
const SIGNAL_SCRIPT =
  'n=1; for d in /proc/[0-9]*; do if tr "\\0" "\\n" < "$d/environ" 2>/dev/null | grep -qxF "$1"; then kill -s "$2" "$(basename "$d")" 2>/dev/null && n=0; fi; done; exit $n';

/** How long a signal looks for a command that compute has not started yet before it cancels the exec instead. */
const SIGNAL_WAIT_MS = 10_000;

/** One event of a running process, as envd streams it. */
export type ProcEvent =
  | { type: "stdout" | "stderr" | "pty"; data: Uint8Array }
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
  /** compute's exec_id, when the command takes input (stdin or a terminal). */
  execId?: string;
  /** Runs on a terminal: its output is `pty` data. */
  pty: boolean;
  /** Input calls one after the other, in the order they came. */
  inputs: Promise<unknown>;
}

/** How long input waits for compute: its exec to be registered, or its queue to have room. */
const INPUT_WAIT_MS = 30_000;

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

  /**
   * Starts the command; `listener` receives every event, the last one `end`.
   * input: its stdin stays open for sendInput, or it runs on a terminal of that size.
   */
  start(
    config: ProcConfig,
    tag: string | undefined,
    listener: (e: ProcEvent) => void,
    input?: { stdin?: boolean; pty?: { rows: number; cols: number } },
  ): number {
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
      pty: input?.pty !== undefined,
      inputs: Promise.resolve(),
      ...(input?.stdin || input?.pty ? { execId: randomUUID() } : {}),
    };
    this.#procs.set(pid, proc);
    void this.#run(proc, input?.pty);
    return pid;
  }

  async #run(proc: Proc, terminal?: { rows: number; cols: number }): Promise<void> {
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
        ...(proc.execId ? { execId: proc.execId, stdin: !terminal, ...(terminal ? { terminal } : {}) } : {}),
      })) {
        if (ev.type === "completed") {
          end =
            ev.cancelled || (proc.signalled && ev.exitCode > 128)
              ? { type: "end", exitCode: -1, status: "signal: killed", error: "signal: killed" }
              : { type: "end", exitCode: ev.exitCode, status: `exit status ${ev.exitCode}` };
        } else emit(proc.pty ? { type: "pty", data: ev.data } : ev);
      }
    } catch (err) {
      end =
        proc.signalled && proc.abort.signal.aborted
          ? { type: "end", exitCode: -1, status: "signal: killed", error: "signal: killed" }
          : { type: "end", exitCode: -1, status: "error", error: err instanceof Error ? err.message : String(err) };
    } finally {
      proc.ended = true;
      this.#procs.delete(proc.pid);
      emit(end);
      proc.listeners.clear();
    }
  }

  /**
   * Input for a command started with stdin (kind "stdin") or on a terminal
   * ("pty"), in compute's chunks, after the input sent before it; eof closes
   * its stdin after. Waits (bounded) while compute has not registered the exec
   * yet or holds 1 MiB the command has not read.
   */
  sendInput(
    select: { pid?: number; tag?: string },
    data: Uint8Array,
    eof: boolean,
    kind?: "stdin" | "pty",
  ): Promise<void> {
    const proc = this.#find(select);
    const execId = proc.execId;
    // A terminal takes both kinds (both are typed on it); a pipe only stdin.
    if (!execId || (kind === "pty" && !proc.pty)) {
      const reason = execId ? "is not a PTY" : "was not started with stdin (start it with stdin: true)";
      return Promise.reject(
        new PlatformError(Code.FailedPrecondition, "failed_precondition", `process ${proc.pid} ${reason}`),
      );
    }
    const chunks: Uint8Array[] = [];
    for (let off = 0; off < data.length; off += MAX_INPUT_CHUNK_BYTES)
      chunks.push(data.subarray(off, off + MAX_INPUT_CHUNK_BYTES));
    if (chunks.length === 0 || eof) chunks.push(new Uint8Array(0));
    const send = async () => {
      for (const [i, chunk] of chunks.entries()) {
        const last = i === chunks.length - 1;
        await this.#retrying(proc, () => this.compute.sendExecInput(this.sandboxId, execId, chunk, eof && last));
      }
    };
    const done = proc.inputs.then(send, send);
    proc.inputs = done.catch(() => {});
    return done;
  }

  /** A terminal's new size. */
  async resize(select: { pid?: number; tag?: string }, size: { rows: number; cols: number }): Promise<void> {
    const proc = this.#find(select);
    if (!proc.pty || !proc.execId)
      throw new PlatformError(Code.FailedPrecondition, "failed_precondition", `process ${proc.pid} has no terminal`);
    const execId = proc.execId;
    await this.#retrying(proc, () => this.compute.resizeExecTerminal(this.sandboxId, execId, size.rows, size.cols));
  }

  /** Retries what compute refuses only for now: its exec not registered yet, its input queue full. */
  async #retrying(proc: Proc, call: () => Promise<void>): Promise<void> {
    const until = Date.now() + INPUT_WAIT_MS;
    for (let delay = 10; ; delay = Math.min(delay * 2, 200)) {
      try {
        return await call();
      } catch (err) {
        const pe = err instanceof PlatformError ? err : undefined;
        const transient =
          (pe?.reason === ComputeReason.execNotFound && !proc.ended) || pe?.reason === ComputeReason.stdinBufferFull;
        if (!transient || Date.now() > until) {
          if (pe?.code === Code.NotFound || proc.ended)
            throw new PlatformError(Code.NotFound, "not_found", `process with pid ${proc.pid} not found`);
          throw err;
        }
        await new Promise((r) => setTimeout(r, delay));
      }
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
    // A command started a moment ago may not be running in the sandbox yet: a scan that finds none of its
    // processes is repeated until it finds them or the command ends (a signal once came before the command
    // and was lost: the SDK's wait() then hung to its deadline).
    const until = Date.now() + SIGNAL_WAIT_MS;
    for (let delay = 10; !proc.ended; delay = Math.min(delay * 2, 200)) {
      if ((await this.#signalMarked(proc, signal)) || proc.ended) return;
      if (Date.now() > until) return void proc.abort.abort(new Error(`signal ${signal}`));
      await new Promise((r) => setTimeout(r, delay));
    }
  }

  /** Whether the scan found any of the command's processes to signal. */
  async #signalMarked(proc: Proc, signal: "KILL" | "TERM"): Promise<boolean> {
    let signalled = false;
    for await (const ev of this.compute.exec({
      sandboxId: this.sandboxId,
      command: "/bin/sh",
      args: ["-c", SIGNAL_SCRIPT, "signal", `${MARK_VAR}=${proc.mark}`, signal],
      env: {},
      timeoutMs: 30_000,
    })) {
      if (ev.type === "completed") signalled = ev.exitCode === 0;
    }
    return signalled;
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
