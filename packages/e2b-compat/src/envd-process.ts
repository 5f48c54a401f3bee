import type { ServiceImpl } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import { type ProcessEvent, type ProcessSelector, type Process, Signal } from "@platform/gen/e2b/process/process_pb";
import { envdSandbox } from "./envd-access.ts";
import { sandboxPath } from "./paths.ts";
import type { ProcEvent } from "./processes.ts";
import type { SandboxRecords } from "./records.ts";
import { Queue } from "./queue.ts";

function selectorOf(s: ProcessSelector | undefined): { pid?: number; tag?: string } {
  if (s?.selector.case === "pid") return { pid: s.selector.value };
  if (s?.selector.case === "tag") return { tag: s.selector.value };
  throw new PlatformError(Code.InvalidArgument, "invalid_argument", "process selector (pid or tag) is required");
}

function toEvent(e: ProcEvent): ProcessEvent["event"] {
  if (e.type === "end")
    return {
      case: "end",
      value: {
        $typeName: "process.ProcessEvent.EndEvent",
        exitCode: e.exitCode,
        exited: e.error === undefined,
        status: e.status,
        error: e.error,
      },
    };
  return {
    case: "data",
    value: { $typeName: "process.ProcessEvent.DataEvent", output: { case: e.type, value: e.data } },
  };
}

/** Streams a process's events until its end or the client's going away. */
async function* stream(
  pid: number,
  queue: Queue<ProcEvent>,
  off: () => void,
  signal: AbortSignal,
): AsyncGenerator<{ event: { event: ProcessEvent["event"] } }> {
  try {
    yield { event: { event: { case: "start", value: { $typeName: "process.ProcessEvent.StartEvent", pid } } } };
    for await (const e of queue.drain(signal)) {
      yield { event: { event: toEvent(e) } };
      if (e.type === "end") return;
    }
  } finally {
    off();
  }
}

const NO_STDIN =
  "stdin is not served by this platform: compute's ExecCommand has no input stream (start commands without stdin)";

/** envd's process.Process over compute's ExecCommand (README: what is served). */
export function processImpl(records: SandboxRecords): ServiceImpl<typeof Process> {
  return {
    async list(_req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      return {
        processes: sb.processes.list().map((p) => ({
          pid: p.pid,
          tag: p.tag,
          config: { cmd: p.config.cmd, args: p.config.args, envs: p.config.envs, cwd: p.config.cwd },
        })),
      };
    },
    start(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      if (req.pty)
        throw new PlatformError(Code.Unimplemented, "unimplemented", "PTY sessions are not served by this platform");
      if (req.stdin) throw new PlatformError(Code.Unimplemented, "unimplemented", NO_STDIN);
      const cfg = req.process;
      if (!cfg?.cmd) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "process.cmd is required");
      const cwd = cfg.cwd ? sandboxPath(cfg.cwd) : undefined;
      const queue = new Queue<ProcEvent>();
      const pid = sb.processes.start({ cmd: cfg.cmd, args: cfg.args, envs: cfg.envs, cwd }, req.tag, (e) =>
        queue.push(e),
      );
      return stream(pid, queue, () => {}, ctx.signal);
    },
    connect(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const queue = new Queue<ProcEvent>();
      const { pid, off } = sb.processes.connect(selectorOf(req.process), (e) => queue.push(e));
      return stream(pid, queue, off, ctx.signal);
    },
    async sendSignal(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      if (req.signal !== Signal.SIGKILL && req.signal !== Signal.SIGTERM)
        throw new PlatformError(Code.InvalidArgument, "invalid_argument", "signal must be SIGKILL or SIGTERM");
      await sb.processes.signal(selectorOf(req.process), req.signal === Signal.SIGKILL ? "KILL" : "TERM");
      return {};
    },
    async sendInput(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", NO_STDIN);
    },
    async streamInput(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", NO_STDIN);
    },
    async closeStdin(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", NO_STDIN);
    },
    async update(_req, ctx) {
      envdSandbox(records, ctx.requestHeader);
      throw new PlatformError(Code.Unimplemented, "unimplemented", "PTY sessions are not served by this platform");
    },
  };
}
