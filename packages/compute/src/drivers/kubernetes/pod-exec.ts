// One pods/exec call as a stream of chunks and an exit code: stdout/stderr
// frames become events as they arrive, the exit code comes from the status
// channel (Success = 0, NonZeroExitCode = details.causes[ExitCode]).
import { Readable, Writable } from "node:stream";
import { Exec, type KubeConfig, type V1Status } from "@kubernetes/client-node";
import { PlatformError } from "@platform/errors";

export type ExecChunk = { type: "stdout" | "stderr"; data: Uint8Array };

export interface PodExecTarget {
  namespace: string;
  pod: string;
  container: string;
}

/** The exit code a status frame reports; throws INTERNAL for a failure that is not an exit code. */
export function exitCodeOf(status: V1Status): number {
  if (status.status === "Success") return 0;
  const cause = status.details?.causes?.find((c) => c.reason === "ExitCode");
  if (status.reason === "NonZeroExitCode" && cause?.message !== undefined && /^\d+$/.test(cause.message))
    return Number(cause.message);
  throw PlatformError.internal(
    "exec transport failure",
    new Error(`exec failed: ${status.reason ?? ""} ${status.message ?? ""}`),
  );
}

export class PodExec {
  private readonly queue: ExecChunk[] = [];
  private wake: (() => void) | undefined;
  private done = false;
  private failure: unknown;
  exitCode: number | undefined;
  readonly finished: Promise<void>;
  private resolveFinished!: () => void;

  private constructor() {
    this.finished = new Promise((r) => (this.resolveFinished = r));
  }

  /** Starts the exec; resolves once the WebSocket is open. */
  static async start(kc: KubeConfig, target: PodExecTarget, command: string[], stdin?: Uint8Array): Promise<PodExec> {
    const e = new PodExec();
    const sink = (type: ExecChunk["type"]) =>
      new Writable({
        write: (chunk: Buffer, _enc, cb) => {
          e.push({ type, data: new Uint8Array(chunk) });
          cb();
        },
      });
    const input = stdin === undefined ? null : Readable.from([Buffer.from(stdin)]);
    try {
      const ws = await new Exec(kc).exec(
        target.namespace,
        target.pod,
        target.container,
        command,
        sink("stdout"),
        sink("stderr"),
        input,
        false,
        (status) => {
          try {
            e.exitCode = exitCodeOf(status);
          } catch (err) {
            e.failure = err;
          }
          e.finish();
        },
      );
      ws.on("close", () => {
        if (e.exitCode === undefined && !e.failure)
          e.failure = PlatformError.internal(
            "exec transport failure",
            new Error("exec stream closed without a status"),
          );
        e.finish();
      });
      ws.on("error", (err) => {
        if (e.exitCode === undefined && !e.failure) e.failure = PlatformError.internal("exec transport failure", err);
        e.finish();
      });
    } catch (err) {
      throw PlatformError.internal("exec transport failure", err);
    }
    return e;
  }

  private push(c: ExecChunk): void {
    this.queue.push(c);
    this.wake?.();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.wake?.();
    this.resolveFinished();
  }

  /** Chunks as they arrive; ends when the status arrived (throws on transport failure). */
  async *chunks(): AsyncGenerator<ExecChunk> {
    for (;;) {
      const next = this.queue.shift();
      if (next) {
        yield next;
        continue;
      }
      if (this.done) break;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = undefined;
    }
    if (this.failure) throw this.failure;
  }

  /** Runs to completion and returns everything (for the driver's own tool calls). */
  static async run(
    kc: KubeConfig,
    target: PodExecTarget,
    command: string[],
    stdin?: Uint8Array,
  ): Promise<{ stdout: Buffer; stderr: Buffer; exitCode: number }> {
    const e = await PodExec.start(kc, target, command, stdin);
    const out: Uint8Array[] = [];
    const err: Uint8Array[] = [];
    for await (const c of e.chunks()) (c.type === "stdout" ? out : err).push(c.data);
    return { stdout: Buffer.concat(out), stderr: Buffer.concat(err), exitCode: e.exitCode ?? -1 };
  }
}
