import { durationFromMs, timestampDate } from "@bufbuild/protobuf/wkt";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { Code, PlatformError } from "@platform/errors";
import { ComputeService, SandboxStatus as Status } from "@platform/gen/compute/v1/compute_pb";
import { fromConnectError } from "@platform/rpc";
import type { ComputePort, ExecEvent, SandboxStatus } from "./compute-port.ts";

const STATUS: Record<number, SandboxStatus> = {
  [Status.STARTING]: "STARTING",
  [Status.READY]: "READY",
  [Status.PAUSED]: "PAUSED",
  [Status.FAILED]: "FAILED",
  [Status.DESTROYED]: "DESTROYED",
};

async function call<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw fromConnectError(err);
  }
}

/** compute.v1.ComputeService as the ComputePort (over the mutual-TLS transport, as the `e2b` certificate). */
export function grpcCompute(transport: Transport): ComputePort {
  const c: Client<typeof ComputeService> = createClient(ComputeService, transport);
  return {
    async createSandbox(input) {
      const res = await call(() =>
        c.createSandbox({
          tenantId: input.tenantId,
          sessionId: input.sessionId,
          workspace: { mountPath: input.mountPath },
          limits: { maxRuntime: durationFromMs(input.maxRuntimeMs) },
          networkPolicy: input.networkPolicy && {
            allowAll: input.networkPolicy.allowAll,
            allowedDomains: input.networkPolicy.allowedDomains,
            allowedCidrs: input.networkPolicy.allowedCidrs.map((cidr) => ({ cidr, ports: [] })),
          },
        }),
      );
      return res.sandboxId;
    },
    async status(sandboxId) {
      try {
        const res = await call(() => c.describeSandbox({ sandboxId }));
        return STATUS[res.status] ?? "FAILED";
      } catch (err) {
        if (err instanceof PlatformError && err.code === Code.NotFound) return "DESTROYED";
        throw err;
      }
    },
    async destroySandbox(sandboxId) {
      await call(() => c.destroySandbox({ sandboxId }));
    },
    async pauseSandbox(sandboxId) {
      await call(() => c.pauseSandbox({ sandboxId }));
    },
    async resumeSandbox(sandboxId) {
      await call(() => c.resumeSandbox({ sandboxId }));
    },
    async *exec(input): AsyncGenerator<ExecEvent> {
      try {
        for await (const e of c.execCommand(
          {
            sandboxId: input.sandboxId,
            command: input.command,
            args: input.args,
            env: input.env,
            workingDir: input.workingDir ?? "",
            timeout: input.timeoutMs > 0 ? durationFromMs(input.timeoutMs) : undefined,
            execId: input.execId ?? "",
            stdin: input.stdin ?? false,
            terminal: input.terminal,
          },
          { signal: input.signal },
        )) {
          const ev = e.event;
          if (ev.case === "stdout" || ev.case === "stderr") yield { type: ev.case, data: ev.value.data };
          else if (ev.case === "completed")
            yield { type: "completed", exitCode: ev.value.exitCode, cancelled: ev.value.cancelled };
        }
      } catch (err) {
        // Our own cancel (kill): compute ends the command; the caller reports it killed.
        if (input.signal?.aborted) {
          yield { type: "completed", exitCode: -1, cancelled: true };
          return;
        }
        throw fromConnectError(err);
      }
    },
    async sendExecInput(sandboxId, execId, data, eof) {
      await call(() => c.sendExecInput({ sandboxId, execId, data, eof }));
    },
    async resizeExecTerminal(sandboxId, execId, rows, cols) {
      await call(() => c.resizeExecTerminal({ sandboxId, execId, size: { rows, cols } }));
    },
    async readFile(sandboxId, path, offset, maxBytes) {
      const r = await call(() => c.readFile({ sandboxId, path, offset: BigInt(offset), maxBytes: BigInt(maxBytes) }));
      return { data: r.data, totalSize: Number(r.totalSize), eof: r.eof };
    },
    async writeFile(sandboxId, path, data, append) {
      await call(() => c.writeFile({ sandboxId, path, data, append }));
    },
    async listFiles(sandboxId, path, recursive, maxEntries) {
      const r = await call(() => c.listFiles({ sandboxId, path, recursive, maxEntries }));
      return {
        truncated: r.truncated,
        entries: r.entries.map((e) => ({
          path: e.path,
          size: Number(e.size),
          isDir: e.isDir,
          mode: e.mode,
          modifiedAt: e.modifiedAt ? timestampDate(e.modifiedAt) : new Date(0),
        })),
      };
    },
  };
}
