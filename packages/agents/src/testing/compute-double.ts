import { randomUUID } from "node:crypto";
import { Code, ConnectError, type HandlerContext } from "@connectrpc/connect";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  ComputeService,
  type ExecCommandRequest,
  type NetworkPolicy,
  SandboxStatus,
} from "@platform/gen/compute/v1/compute_pb";
import { type Served, serveH2c } from "./serve.ts";

/**
 * A stand-in for compute's gRPC ComputeService, served through the real
 * Connect stack, with an in-memory workspace per session (as compute's: a
 * new sandbox of the same tenant and session sees the files of the one
 * before), PAUSED sandboxes (see pause()) that ResumeSandbox, ExecCommand
 * and the file calls resume, and FAILED ones (see fail()). ExecCommand runs
 * `bash -c <script>` by these rules (it is not a shell):
 *   `echo <text>` → stdout `<text>\n`, exit 0;  `exit <n>` → exit n;
 *   `yes <n>` → n bytes of "y\n" on stdout;  `hang` → never ends until cancelled;
 *   `netdeny <host> <port>` → a refused connection in ListNetworkEvents, exit 56;
 *   `cat <path>` → the file;  `ticks <n> <ms>` → `tick <i>\n` on stdout n times, <ms> apart;
 *   anything else → stderr "command not found", exit 127.
 */
/** CPU and wall time the double reports for every exec (ExecCompleted.usage.cpu_ms, wall_time). */
export const EXEC_CPU_MS = 7;
export const EXEC_WALL_MS = 12;

export class ComputeDouble {
  readonly createCalls: Array<{ tenantId: string; sessionId: string; networkPolicy?: NetworkPolicy; image?: string }> =
    [];
  /** The stored images ListImages answers (issue 22), beside `host`. */
  images: string[] = [];
  /** Each sandbox's network events (ListNetworkEvents); `netdeny <host> <port>` adds a refusal. */
  readonly networkEvents = new Map<string, Array<{ host: string; port: number; reason: string; at: Date }>>();
  readonly destroyCalls: string[] = [];
  readonly execCalls: Array<{ sandboxId: string; command: string; args: string[] }> = [];
  /** `hang` execs whose call the client cancelled (compute would SIGTERM them, then SIGKILL after its grace). */
  readonly cancelledExecs: string[] = [];
  /** The CPU time every exec reports (tests of CPU budgets raise it). */
  execCpuMs = EXEC_CPU_MS;
  readonly files = new Map<string, Map<string, Uint8Array>>();
  /** Sandboxes reported FAILED by DescribeSandbox (see fail()). */
  readonly failed = new Set<string>();
  /** Sandboxes reported DESTROYED by DescribeSandbox (DestroySandbox). */
  readonly destroyed = new Set<string>();
  /** Sandboxes reported PAUSED by DescribeSandbox (see pause()). */
  readonly paused = new Set<string>();
  /** Sandboxes resumed: by ResumeSandbox, or by an exec or file call on a PAUSED one. */
  readonly resumeCalls: Array<{ sandboxId: string; by: "ResumeSandbox" | "call" }> = [];
  /** The workspace of each tenant and session. */
  readonly #workspaces = new Map<string, Map<string, Uint8Array>>();
  #served?: Served;

  async start(): Promise<string> {
    this.#served = await serveH2c((router) => {
      router.service(ComputeService, {
        createSandbox: (req) => {
          if (!req.tenantId || !req.sessionId)
            throw new ConnectError("tenant_id and session_id are required", Code.InvalidArgument);
          this.createCalls.push({
            tenantId: req.tenantId,
            sessionId: req.sessionId,
            ...(req.networkPolicy ? { networkPolicy: req.networkPolicy } : {}),
            ...(req.image ? { image: req.image } : {}),
          });
          const sandboxId = randomUUID();
          const key = `${req.tenantId}/${req.sessionId}`;
          const workspace = this.#workspaces.get(key) ?? new Map<string, Uint8Array>();
          this.#workspaces.set(key, workspace);
          this.files.set(sandboxId, workspace);
          return { sandboxId, status: SandboxStatus.STARTING };
        },
        listImages: () => ({
          images: this.images.map((name) => ({ name, digest: `sha256:${"0".repeat(64)}` })),
          defaultImage: "debian:bookworm-slim",
          defaultIsHost: true,
          anyImage: false,
        }),
        describeSandbox: (req) => {
          if (!this.files.has(req.sandboxId))
            throw new ConnectError(`sandbox ${req.sandboxId} not found`, Code.NotFound);
          return {
            sandboxId: req.sandboxId,
            status: this.destroyed.has(req.sandboxId)
              ? SandboxStatus.DESTROYED
              : this.failed.has(req.sandboxId)
                ? SandboxStatus.FAILED
                : this.paused.has(req.sandboxId)
                  ? SandboxStatus.PAUSED
                  : SandboxStatus.READY,
          };
        },
        resumeSandbox: (req) => {
          if (!this.files.has(req.sandboxId))
            throw new ConnectError(`sandbox ${req.sandboxId} not found`, Code.NotFound);
          if (this.failed.has(req.sandboxId) || this.destroyed.has(req.sandboxId))
            throw new ConnectError(`sandbox ${req.sandboxId} is not runnable`, Code.FailedPrecondition);
          if (this.paused.delete(req.sandboxId))
            this.resumeCalls.push({ sandboxId: req.sandboxId, by: "ResumeSandbox" });
          return { sandboxId: req.sandboxId, status: SandboxStatus.READY };
        },
        destroySandbox: (req) => {
          if (!this.files.has(req.sandboxId))
            throw new ConnectError(`sandbox ${req.sandboxId} not found`, Code.NotFound);
          this.destroyCalls.push(req.sandboxId);
          this.destroyed.add(req.sandboxId);
          return { sandboxId: req.sandboxId };
        },
        execCommand: (req, ctx) => this.#exec(req, ctx),
        listNetworkEvents: (req) => {
          if (!this.files.has(req.sandboxId))
            throw new ConnectError(`sandbox ${req.sandboxId} not found`, Code.NotFound);
          const after = req.pageToken ? Number(req.pageToken) : 0;
          const all = this.networkEvents.get(req.sandboxId) ?? [];
          const page = all.slice(after, after + (req.pageSize || 100));
          return {
            events: page.map((e, i) => ({
              sequence: BigInt(after + i + 1),
              time: timestampFromDate(e.at),
              host: e.host,
              port: e.port,
              allowed: false,
              reason: e.reason,
              protocol: "connect",
            })),
            nextPageToken: String(after + page.length),
          };
        },
        readFile: (req) => {
          const data = this.#fs(req.sandboxId).get(clean(req.path));
          if (!data) throw new ConnectError(`${req.path}: no such file`, Code.NotFound);
          const max = Number(req.maxBytes) || data.length;
          return { data: data.subarray(0, max), totalSize: BigInt(data.length), eof: max >= data.length };
        },
        writeFile: (req) => {
          this.#fs(req.sandboxId).set(clean(req.path), req.data);
          return { bytesWritten: BigInt(req.data.length) };
        },
        listFiles: (req) => {
          const entries = [...this.#fs(req.sandboxId).entries()].map(([path, data]) => ({
            path,
            size: BigInt(data.length),
            isDir: false,
          }));
          return { entries, truncated: false };
        },
      });
    });
    return this.#served.url;
  }

  /** Makes a sandbox PAUSED, as compute's idle period or PauseSandbox would. */
  pause(sandboxId: string): void {
    this.paused.add(sandboxId);
  }

  /** Makes a sandbox FAILED, as a platform restart or its max runtime would. */
  fail(sandboxId: string): void {
    this.failed.add(sandboxId);
  }

  /** Makes a sandbox unknown to compute, as one lost with a restart of compute is (its workspace stays). */
  forget(sandboxId: string): void {
    this.files.delete(sandboxId);
    this.paused.delete(sandboxId);
  }

  /** Where it listens (after start). */
  get url(): string {
    return this.#served?.url ?? "";
  }

  async stop(): Promise<void> {
    await this.#served?.close();
  }

  async *#exec(req: ExecCommandRequest, ctx: HandlerContext) {
    const fs = this.#fs(req.sandboxId);
    this.execCalls.push({ sandboxId: req.sandboxId, command: req.command, args: [...req.args] });
    const script =
      req.command.endsWith("bash") && req.args[0] === "-c" ? (req.args[1] ?? "") : [req.command, ...req.args].join(" ");
    const out = (s: string | Uint8Array) => ({
      event: { case: "stdout" as const, value: { data: typeof s === "string" ? Buffer.from(s) : s } },
    });
    // Usage as compute reports it: CPU and wall time of each exec (fixed here, so sums can be checked).
    const done = (exitCode: number, cancelled = false) => ({
      event: {
        case: "completed" as const,
        value: {
          exitCode,
          cancelled,
          wallTime: { seconds: 0n, nanos: EXEC_WALL_MS * 1_000_000 },
          usage: { cpuMs: BigInt(this.execCpuMs) },
        },
      },
    });
    let m: RegExpExecArray | null;
    if ((m = /^netdeny (\S+) (\d+)$/.exec(script))) {
      const list = this.networkEvents.get(req.sandboxId) ?? [];
      list.push({ host: m[1]!, port: Number(m[2]), reason: "not_allowed", at: new Date() });
      this.networkEvents.set(req.sandboxId, list);
      yield done(56);
    } else if ((m = /^echo (.*)$/s.exec(script))) {
      yield out(`${m[1]}\n`);
      yield done(0);
    } else if ((m = /^exit (\d+)$/.exec(script))) {
      yield done(Number(m[1]));
    } else if ((m = /^yes (\d+)$/.exec(script))) {
      const n = Number(m[1]);
      for (let sent = 0; sent < n; sent += 4096) yield out(Buffer.from("y\n".repeat(Math.min(4096, n - sent) / 2)));
      yield done(0);
    } else if ((m = /^cat (\S+)$/.exec(script))) {
      const data = fs.get(m[1]!);
      if (data) yield out(data);
      yield done(data ? 0 : 1);
    } else if ((m = /^ticks (\d+) (\d+)$/.exec(script))) {
      for (let i = 1; i <= Number(m[1]); i++) {
        yield out(`tick ${i}\n`);
        await new Promise((resolve) => setTimeout(resolve, Number(m![2])));
      }
      yield done(0);
    } else if (script === "hang") {
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      this.cancelledExecs.push(req.sandboxId);
      yield done(-1, true);
    } else {
      yield {
        event: {
          case: "stderr" as const,
          value: { data: Buffer.from(`${script.split(" ")[0]}: command not found\n`) },
        },
      };
      yield done(127);
    }
  }

  #fs(sandboxId: string): Map<string, Uint8Array> {
    const fs = this.files.get(sandboxId);
    if (!fs) throw new ConnectError(`sandbox ${sandboxId} not found`, Code.NotFound);
    // Compute resumes a PAUSED sandbox on an exec or file call.
    if (this.paused.delete(sandboxId)) this.resumeCalls.push({ sandboxId, by: "call" });
    return fs;
  }
}

function clean(path: string): string {
  return path.replace(/^\.?\/+/, "").replace(/^workspace\//, "");
}
