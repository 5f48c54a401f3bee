import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";

const CHILD = fileURLToPath(new URL("./child.ts", import.meta.url));

export interface ChildStats {
  rss: number;
  heapUsed: number;
  external: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  /** GC pauses since the last resetLag (PerformanceObserver "gc" entries). */
  gc: { count: number; totalMs: number; maxMs: number };
  cpu: { user: number; system: number };
}

/** A service under test running in its own Node process (see child.ts). */
export class ServiceProcess {
  #seq = 0;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(
    readonly kind: string,
    readonly child: ChildProcess,
    readonly urls: Record<string, string>,
  ) {
    child.on("message", (raw) => {
      const msg = raw as { id?: number; result?: unknown; error?: string };
      if (msg.id === undefined) return;
      const p = this.#pending.get(msg.id);
      this.#pending.delete(msg.id);
      if (msg.error) p?.reject(new Error(msg.error));
      else p?.resolve(msg.result);
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  static async start(
    kind: "identity" | "compute" | "agents" | "bare-sse" | "bare-grpc",
    env: Record<string, string>,
    timeoutMs = 60_000,
  ): Promise<ServiceProcess> {
    const child = fork(CHILD, [kind], {
      execArgv: [
        "--import",
        "tsx",
        "--expose-gc",
        ...(process.env.BENCH_CHILD_EXEC_ARGV?.split(" ").filter(Boolean) ?? []),
      ],
      env: { ...process.env, LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    const urls = await new Promise<Record<string, string>>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`${kind} did not start within ${timeoutMs} ms`));
      }, timeoutMs);
      child.on("message", function onMsg(raw) {
        const msg = raw as { type?: string; urls?: Record<string, string>; error?: string };
        if (msg.type === "ready") {
          clearTimeout(timer);
          child.off("message", onMsg);
          resolve(msg.urls!);
        } else if (msg.type === "failed") {
          clearTimeout(timer);
          reject(new Error(`${kind} failed to start: ${msg.error}`));
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`${kind} exited with ${code} before it was ready`));
      });
    });
    return new ServiceProcess(kind, child, urls);
  }

  /** `args` travel with the request (the child's handler of `type` reads them). */
  request<T>(type: string, timeoutMs = 30_000, args: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#seq;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`${this.kind}: ${type} timed out`));
      }, timeoutMs);
      this.#pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      // The callback takes a send to a process already gone (ERR_IPC_CHANNEL_CLOSED), which would
      // otherwise be an unhandled 'error' event: a late stats timer once ended a whole run so.
      if (!this.child.connected) {
        this.#pending.get(id)?.reject(new Error(`${this.kind}: ${type}: the process is gone`));
        this.#pending.delete(id);
        return;
      }
      this.child.send({ ...args, id, type }, (err) => {
        if (!err) return;
        this.#pending.get(id)?.reject(err);
        this.#pending.delete(id);
      });
    });
  }

  stats(): Promise<ChildStats> {
    return this.request<ChildStats>("stats");
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    await this.request("close", 20_000).catch(() => {});
    // It exits by itself after closing (so profiles get written); signals only if it does not.
    const term = setTimeout(() => this.child.kill("SIGTERM"), 5000);
    const kill = setTimeout(() => this.child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(term);
    clearTimeout(kill);
  }
}
