import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { LoadRequest } from "./load-child.ts";
import type { OpenLoopResult } from "./open-loop.ts";

const CHILD = fileURLToPath(new URL("./load-child.ts", import.meta.url));

type Without<T> = T extends unknown ? Omit<T, "id"> : never;

/** The bench's side of load-child.ts: VerifyAPIKey load offered from a process of its own. */
export class LoadProcess {
  #next = 0;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  private constructor(private readonly child: ChildProcess) {
    child.on("message", (raw) => {
      const msg = raw as { id: number; result?: unknown; error?: string };
      const p = this.#pending.get(msg.id);
      this.#pending.delete(msg.id);
      if (msg.error !== undefined) p?.reject(new Error(`load generator: ${msg.error}`));
      else p?.resolve(msg.result);
    });
    child.once("exit", (code) => {
      for (const p of this.#pending.values()) p.reject(new Error(`load generator exited (${code})`));
      this.#pending.clear();
    });
  }

  static start(): LoadProcess {
    // Buffers (the TLS files) and typed arrays cross as they are.
    return new LoadProcess(
      fork(CHILD, [], {
        execArgv: ["--import", "tsx"],
        serialization: "advanced",
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      }),
    );
  }

  #ask<T>(req: Without<LoadRequest>): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.child.send({ ...req, id });
    });
  }

  /** An HTTP/2 connection named `name` (mutual TLS with `tls`). */
  connect(name: string, url: string, tls?: { ca: Buffer; cert: Buffer; key: Buffer }): Promise<void> {
    return this.#ask({ type: "connect", name, url, ...(tls ? { tls } : {}) });
  }

  /** `times` VerifyAPIKey calls one after another on `name`. */
  verifyAPIKey(name: string, apiKey: string, times: number): Promise<void> {
    return this.#ask({ type: "verifyAPIKey", name, apiKey, times });
  }

  /** VerifyAPIKey on `name` offered at `rate`/s for `seconds` (open loop). */
  openLoop(name: string, apiKey: string, rate: number, seconds: number): Promise<OpenLoopResult> {
    return this.#ask({ type: "openLoop", name, apiKey, rate, seconds });
  }

  async close(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    await this.#ask({ type: "close" }).catch(() => {});
    this.child.disconnect();
    await exited;
  }
}
