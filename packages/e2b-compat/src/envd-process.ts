import type { ServiceImpl } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import {
  type ProcessEvent,
  type ProcessInput,
  type ProcessSelector,
  type Process,
  Signal,
} from "@platform/gen/e2b/process/process_pb";
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

/** A PTY's size as compute takes it (0 → compute's 24 x 80). */
function sizeOf(pty: { size?: { rows: number; cols: number } } | undefined): { rows: number; cols: number } {
  return { rows: pty?.size?.rows ?? 0, cols: pty?.size?.cols ?? 0 };
}

function inputOf(input: ProcessInput | undefined): { data: Uint8Array; kind: "stdin" | "pty" } {
  if (input?.input.case === "stdin" || input?.input.case === "pty")
    return { data: input.input.value, kind: input.input.case };
  throw new PlatformError(Code.InvalidArgument, "invalid_argument", "input (stdin or pty) is required");
}

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
      const cfg = req.process;
      if (!cfg?.cmd) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "process.cmd is required");
      const cwd = cfg.cwd ? sandboxPath(cfg.cwd) : undefined;
      const queue = new Queue<ProcEvent>();
      const pid = sb.processes.start(
        { cmd: cfg.cmd, args: cfg.args, envs: cfg.envs, cwd },
        req.tag,
        (e) => queue.push(e),
        req.pty ? { pty: sizeOf(req.pty) } : { stdin: req.stdin === true },
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
    async sendInput(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      const { data, kind } = inputOf(req.input);
      await sb.processes.sendInput(selectorOf(req.process), data, false, kind);
      return {};
    },
    async streamInput(reqs, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      let select: { pid?: number; tag?: string } | undefined;
      for await (const req of reqs) {
        const ev = req.event;
        if (ev.case === "start") select = selectorOf(ev.value.process);
        else if (ev.case === "data") {
          if (!select)
            throw new PlatformError(Code.InvalidArgument, "invalid_argument", "the start event must come first");
          const { data, kind } = inputOf(ev.value.input);
          await sb.processes.sendInput(select, data, false, kind);
        }
      }
      return {};
    },
    async closeStdin(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      await sb.processes.sendInput(selectorOf(req.process), new Uint8Array(0), true);
      return {};
    },
    async update(req, ctx) {
      const sb = envdSandbox(records, ctx.requestHeader);
      if (!req.pty?.size) throw new PlatformError(Code.InvalidArgument, "invalid_argument", "pty.size is required");
      await sb.processes.resize(selectorOf(req.process), sizeOf(req.pty));
      return {};
    },
  };
}
