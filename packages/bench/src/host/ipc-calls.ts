import type { ChildProcess } from "node:child_process";

/**
 * Requests to a child process over its IPC channel: each carries an id and a
 * type, and the child answers `{ id, result }` or `{ id, error }`. Messages
 * without an id are left to other listeners.
 */
export class IpcCalls {
  #seq = 0;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  constructor(
    private readonly child: ChildProcess,
    /** Names the process in errors. */
    private readonly name: string,
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

  /** `args` travel with the request (the child's handler of `type` reads them). */
  request<T>(type: string, timeoutMs: number, args: Record<string, unknown> = {}): Promise<T> {
    const id = ++this.#seq;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`${this.name}: ${type} timed out`));
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
        this.#pending.get(id)?.reject(new Error(`${this.name}: ${type}: the process is gone`));
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

  /** Rejects every request still waiting, with `err`. */
  rejectAll(err: Error): void {
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }
}
